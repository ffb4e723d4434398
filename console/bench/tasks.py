"""Celery tasks of the bench app: thin wrappers over execution and lifecycle."""

from __future__ import annotations

from celery import shared_task

from console.bench import adaptive, execution, lifecycle


@shared_task(name="bench.run_benchmark", acks_late=True, ignore_result=True)
def run_benchmark(run_id: int) -> str:
    """Idempotent: the run is claimed with a conditional UPDATE, so a redelivery (acks_late
    after a worker died) finds it taken and returns. Time limits are set per run at enqueue."""
    return execution.execute_run(run_id)


@shared_task(name="bench.detect_lost_runs", acks_late=True, ignore_result=True)
def detect_lost_runs() -> list[int]:
    """Beat, every 30 s: running runs whose progress went quiet are marked failed."""
    return lifecycle.mark_lost_runs()


@shared_task(name="bench.run_series", acks_late=True, ignore_result=True)
def run_series(series_ids: list[int]) -> list[str]:
    """Repeats: the series' runs one after another (interleaved for a pair). Idempotent like
    run_benchmark: each run is claimed, so a redelivery continues with the pending ones. A
    pair run "until decided" then reads its decision and may queue another round."""
    statuses = execution.execute_series(series_ids)
    adaptive.next_round(series_ids)
    return statuses
