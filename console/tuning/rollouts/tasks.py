"""Celery tasks of rollouts. Both are idempotent: running either twice does nothing more.

`run_rollout` executes one rollout under a lease (executor.py): a duplicate message, or a
second worker, finds the lease held and returns at once. `resume_rollouts` (Celery beat, every
few seconds) hands every unfinished rollout whose lease has expired to a worker again, so one
whose worker died is resumed or finalised, never left running forever
(docs/architecture.md#security-and-reliability).
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.db.models import Q
from django.utils import timezone

from console.tuning.rollouts.choices import ACTIVE_STATES, RolloutState
from console.tuning.rollouts.executor import execute
from console.tuning.rollouts.models import Rollout

log = logging.getLogger(__name__)


@shared_task(name="tuning.run_rollout", acks_late=True, ignore_result=True)
def run_rollout(rollout_id: int) -> str:
    return execute(rollout_id)


def orphaned_rollouts() -> list[int]:
    """Unfinished rollouts that no worker holds, but for those paused to ask an operator
    (nothing to do until they resume or abort it)."""
    now = timezone.now()
    return list(
        Rollout.objects.filter(state__in=ACTIVE_STATES)
        .exclude(state=RolloutState.PAUSED, abort_requested=False)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .values_list("pk", flat=True)
    )


@shared_task(name="tuning.resume_rollouts", ignore_result=True)
def resume_rollouts() -> list[int]:
    ids = orphaned_rollouts()
    for rollout_id in ids:
        log.info("resuming rollout %s", rollout_id)
        run_rollout.delay(rollout_id)
    return ids
