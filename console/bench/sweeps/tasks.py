"""Celery tasks of sweeps. Both are idempotent: running either twice does nothing more.

`run_sweep` executes one sweep under a lease (executor.py): a duplicate message, or a second
worker, finds the lease held and returns at once. `resume_sweeps` (Celery beat, every few
seconds, as `resume_rollouts` is for rollouts) hands every unfinished sweep whose lease has
expired to a worker again, so one whose worker died is resumed and ends with the node on its
base, never left running forever (docs/architecture.md#security-and-reliability).

    enqueue(sweep)    # services.create_sweep: once the creating transaction commits
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from console.bench import services as bench_services
from console.bench.sweeps.choices import ACTIVE
from console.bench.sweeps.executor import apply_timeout_s, execute
from console.bench.sweeps.models import Sweep

log = logging.getLogger(__name__)


@shared_task(name="bench.run_sweep", acks_late=True, ignore_result=True)
def run_sweep(sweep_id: int) -> str:
    return execute(sweep_id)


def time_limit_s(sweep: Sweep) -> int:
    """Every planned trial's apply and benchmarks, plus the restore: the task's hard limit
    (the default task limit would stop a long sweep half-way)."""
    per_run = bench_services.time_limit_s(sweep.workload)
    trials = max(sweep.trials_planned, 1)
    return int(trials * (apply_timeout_s() + sweep.repeats * per_run) + 2 * apply_timeout_s())


def dispatch(sweep: Sweep) -> None:
    limit = time_limit_s(sweep)
    run_sweep.apply_async(
        (sweep.pk,),
        task_id=sweep.celery_task_id or None,
        time_limit=limit,
        soft_time_limit=limit - 10,
    )


def enqueue(sweep: Sweep) -> None:
    """Hand the sweep to a worker once the rows that describe it are committed."""
    sweep_id = sweep.pk
    transaction.on_commit(lambda: dispatch(Sweep.objects.get(pk=sweep_id)))


def orphaned_sweeps() -> list[int]:
    """Unfinished sweeps that no worker holds."""
    now = timezone.now()
    return list(
        Sweep.objects.filter(status__in=ACTIVE)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .values_list("pk", flat=True)
    )


@shared_task(name="bench.resume_sweeps", ignore_result=True)
def resume_sweeps() -> list[int]:
    ids = orphaned_sweeps()
    for sweep in Sweep.objects.filter(pk__in=ids):
        log.info("resuming %s", sweep)
        # A new task id: the first one's may still be marked revoked or done by the broker.
        limit = time_limit_s(sweep)
        run_sweep.apply_async((sweep.pk,), time_limit=limit, soft_time_limit=limit - 10)
    return ids
