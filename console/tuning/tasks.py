"""Celery tasks of the tuning app (found by the Celery app's autodiscovery)."""

from __future__ import annotations

from console.tuning.rollouts.tasks import resume_rollouts, run_rollout

__all__ = ["resume_rollouts", "run_rollout"]
