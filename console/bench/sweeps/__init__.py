"""Tuning sweeps (issue 19, docs/sweeps.md): change one variable, benchmark, compare, adopt.

- choices.py: kinds, modes, statuses and objectives.
- models.py: Sweep and SweepTrial (registered with the bench app by console/bench/models.py).
- spec.py, planner.py, scoring.py: pure cores (no Django): the sweep's spec and how a value is
  applied to a base document, which trial comes next, and how a trial is scored.
- services.py: create, cancel and adopt, called by the API, the views and the tasks alike.
- tasks.py / executor.py: running the trials on Celery.
"""
