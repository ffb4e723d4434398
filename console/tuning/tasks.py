"""Celery tasks of the tuning app (found by the Celery app's autodiscovery)."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from console.tuning.gitmirror import sync_configured
from console.tuning.rollouts.tasks import resume_rollouts, run_rollout


@shared_task(name="tuning.mirror_to_git", acks_late=True, ignore_result=True)
def mirror_to_git() -> list[str]:
    """Commit every config version the Git mirror lacks (idempotent; see gitmirror.py)."""
    return sync_configured()


def schedule_mirror() -> None:
    """After a version's transaction commits: have a worker mirror it (when configured). A
    broker that refuses the message loses nothing: the next sync commits this version too."""
    if not settings.TIERGATE_GIT_MIRROR:
        return
    try:
        mirror_to_git.apply_async(queue=settings.TIERGATE_GIT_MIRROR_QUEUE or None)
    except Exception:  # the version is stored; only its mirroring waits for the next one
        logging.getLogger(__name__).exception("cannot schedule the git mirror")


__all__ = ["mirror_to_git", "resume_rollouts", "run_rollout", "schedule_mirror"]
