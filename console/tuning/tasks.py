"""Celery tasks of the tuning app (found by the Celery app's autodiscovery)."""

from __future__ import annotations

from celery import shared_task

from console.tuning.gitmirror import sync_configured
from console.tuning.rollouts.tasks import resume_rollouts, run_rollout


@shared_task(name="tuning.mirror_to_git", acks_late=True, ignore_result=True)
def mirror_to_git() -> list[str]:
    """Commit every config version the Git mirror lacks (idempotent; see gitmirror.py)."""
    return sync_configured()


__all__ = ["mirror_to_git", "resume_rollouts", "run_rollout"]
