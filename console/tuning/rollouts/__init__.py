"""Rollouts and rollbacks (docs/architecture.md#rollouts-and-rollbacks): desired versions set wave
by wave, watched until the agents report them applied and healthy, guarded by an optional SLO check,
and undone on any failure. The modules here:

    models.py    Rollout, RolloutNode, RolloutEvent (registered with the tuning app)

    choices.py   states and other enumerations
    plan.py      pure: waves, a node's progress verdict
    guard.py     pure: the SLO guard over heartbeat samples
    targets.py   which nodes (stale or never-seen targets left out by default), Target
    services.py  create, roll back, abort (audited, transactional)
    executor.py  the loop a Celery task runs (claimed by a lease, resumable)
    reverting.py its backward half: restore every touched node exactly
    parts.py     a rollout node's facts, changed kinds and restores
    tasks.py     the Celery tasks
    api/         REST API; views.py, forms.py, urls.py: pages
"""
