"""State transitions of a benchmark run: claim, finish, lost-worker detection.

Each is a conditional UPDATE (hc's sendalerts habit), so racing hands (a redelivered task, a
cancel click, the lost-worker sweep, the finishing task) never overwrite each other's
decision. Nothing here enqueues work: the workflows that do (create, cancel) are in
services.py, which the execution shell and the tasks never import.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from console.audit.choices import Action
from console.audit.services import record
from console.bench.choices import RunStatus
from console.bench.models import BenchmarkRun

# Progress is written about twice a second; a running run silent for this long lost its worker.
LOST_AFTER = timedelta(seconds=60)


def claim(run_id: int, now: datetime | None = None) -> bool:
    """pending -> running, once: a redelivered task finds the run taken and does nothing."""
    now = now or timezone.now()
    return (
        BenchmarkRun.objects.filter(pk=run_id, status=RunStatus.PENDING).update(
            status=RunStatus.RUNNING,
            started_at=now,
            heartbeat_at=now,
        )
        == 1
    )


def finish(run_id: int, status: str, reason: str = "", **fields: Any) -> bool:
    """running -> a final state, unless something else (cancel of a pending run, the lost
    worker sweep) already decided; returns whether this call decided."""
    return (
        BenchmarkRun.objects.filter(pk=run_id, status=RunStatus.RUNNING).update(
            status=status,
            status_reason=reason[:500],
            finished_at=timezone.now(),
            **fields,
        )
        == 1
    )


def mark_lost_runs(now: datetime | None = None, lost_after: timedelta = LOST_AFTER) -> list[int]:
    """Fail every running run whose task stopped reporting (its worker died or was killed)."""
    now = now or timezone.now()
    stale = list(
        BenchmarkRun.objects.filter(
            status=RunStatus.RUNNING, heartbeat_at__lt=now - lost_after
        ).values_list("pk", flat=True)
    )
    lost = []
    for pk in stale:
        with transaction.atomic():
            if BenchmarkRun.objects.filter(
                pk=pk, status=RunStatus.RUNNING, heartbeat_at__lt=now - lost_after
            ).update(
                status=RunStatus.FAILED,
                finished_at=now,
                status_reason=(
                    f"worker lost: no progress for over {int(lost_after.total_seconds())} s"
                ),
            ):
                record(
                    action=Action.UPDATE,
                    object_type="bench.benchmarkrun",
                    object_id=str(pk),
                    object_repr=f"benchmark #{pk}",
                    message="marked failed: worker lost",
                )
                lost.append(pk)
    return lost
