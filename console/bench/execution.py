"""The I/O shell around the load generator: what the Celery task does with one run.

claim -> snapshot the target -> reset its prefix cache and read its counters (probes) ->
run_workload (progress and heartbeat written to the row, cancel flag read back) -> store
samples, summary, time series, validity, error breakdown, conditions -> final status (from
the samples: outcomes.py). A series (repeats) is its runs one after another (execute_series).
The API key is read from the endpoint here, inside the task, and goes nowhere else.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.db import connections, transaction
from django.utils import timezone

from console.bench import lifecycle, probes, snapshots
from console.bench.choices import RunStatus
from console.bench.models import BenchmarkRun, RequestSample, RunSeries
from console.bench.outcomes import error_breakdown, run_outcome
from console.bench.presets import prompts_jsonl
from loadgen import Progress, RunResult, WorkloadSpec, run_workload

log = logging.getLogger(__name__)

SAMPLE_BATCH = 2000


def _unix_to_dt(value: float) -> datetime:
    return datetime.fromtimestamp(value, tz=UTC)


class _Reporter:
    """on_progress for run_workload: writes progress + heartbeat, turns a cancel click (or a
    run someone else already finished) into the cancel event. Called about every 0.5 s from a
    helper thread, never concurrently with itself."""

    def __init__(self, run_id: int, cancel: threading.Event) -> None:
        self.run_id = run_id
        self.cancel = cancel
        self.caller = threading.get_ident()

    def __call__(self, progress: Progress) -> None:
        try:
            BenchmarkRun.objects.filter(pk=self.run_id, status=RunStatus.RUNNING).update(
                progress_percent=min(progress.percent, 100.0),
                elapsed_s=progress.elapsed_s,
                requests_done=progress.requests_done,
                errors=progress.errors,
                current_p99_ttft_s=progress.current_p99_ttft_s,
                heartbeat_at=timezone.now(),
            )
            state = (
                BenchmarkRun.objects.filter(pk=self.run_id)
                .values_list("status", "cancel_requested")
                .first()
            )
            if state is None or state[0] != RunStatus.RUNNING or state[1]:
                self.cancel.set()
        finally:
            if threading.get_ident() != self.caller:
                # Helper threads come and go with the event loop's executor; leave no connection.
                connections.close_all()


def _beat(run_id: int) -> None:
    BenchmarkRun.objects.filter(pk=run_id).update(heartbeat_at=timezone.now())


def build_spec(run: BenchmarkRun, prompts_dir: Path) -> WorkloadSpec:
    data = {**run.workload, "base_url": run.endpoint.base_url, "model": run.model}
    if run.tier_profiles:
        path = prompts_dir / f"run-{run.pk}.jsonl"
        path.write_text(
            prompts_jsonl(run.tier_profiles, seed=int(data.get("seed") or 0)), encoding="utf-8"
        )
        data["prompts_file"] = str(path)
    spec = WorkloadSpec.from_dict(data)
    spec.api_key = run.endpoint.get_api_key() or None
    return spec


def store_result(run_id: int, result: RunResult) -> None:
    """Samples in batches (heartbeat between them: 100k rows take a while), then the figures."""
    with transaction.atomic():
        RequestSample.objects.filter(run_id=run_id).delete()
    batch: list[RequestSample] = []
    for sample in result.samples:
        batch.append(RequestSample.from_loadgen(run_id, sample))
        if len(batch) >= SAMPLE_BATCH:
            RequestSample.objects.bulk_create(batch)
            batch.clear()
            _beat(run_id)
    if batch:
        RequestSample.objects.bulk_create(batch)


def execute_run(run_id: int) -> str:
    """Run one benchmark; returns the final status (or "skipped" when another hand has it)."""
    if not lifecycle.claim(run_id):
        log.info("benchmark %s: not pending any more, nothing to do", run_id)
        return "skipped"
    run = BenchmarkRun.objects.select_related("endpoint", "endpoint__node").get(pk=run_id)
    try:
        snapshot = snapshots.snapshot_config(run.endpoint)
        BenchmarkRun.objects.filter(pk=run_id).update(config_snapshot=snapshot)
        cancel = threading.Event()
        with tempfile.TemporaryDirectory(prefix="tiergate-bench-") as tmp:
            spec = build_spec(run, Path(tmp))
            before = probes.before_run(run)
            result = asyncio.run(
                run_workload(spec, on_progress=_Reporter(run_id, cancel), cancel_event=cancel)
            )
        conditions = probes.after_run(run, before)
        store_result(run_id, result)
        state = (
            BenchmarkRun.objects.filter(pk=run_id)
            .values_list("cancel_requested", flat=True)
            .first()
        )
        cancelled = result.cancelled or bool(state)
        fields: dict[str, Any] = {
            "summary": result.summary,
            "timeseries": result.timeseries,
            "validity": result.validity,
            "error_breakdown": error_breakdown(result.samples),
            "conditions": conditions,
            "measured_from": _unix_to_dt(result.window[0]),
            "measured_to": _unix_to_dt(result.window[1]),
            "heartbeat_at": timezone.now(),
        }
        if not cancelled:
            fields["progress_percent"] = 100.0
        status: str
        if cancelled:
            status = RunStatus.CANCELLED
            reason = "cancelled by a user; results cover the requests completed"
        else:
            status, reason = run_outcome(result.samples)
        if not lifecycle.finish(run_id, status, reason, **fields):
            # Already decided elsewhere (e.g. swept as lost): keep its status, keep the results.
            BenchmarkRun.objects.filter(pk=run_id).update(**fields)
        return str(status)
    except BaseException as exc:
        # BaseException: the soft time limit and worker shutdown must leave a final state too.
        log.exception("benchmark %s failed", run_id)
        lifecycle.finish(run_id, RunStatus.FAILED, f"{type(exc).__name__}: {exc}")
        if isinstance(exc, Exception):
            return str(RunStatus.FAILED)
        raise


def execute_series(series_ids: list[int]) -> list[str]:
    """Run the pending runs of these series one at a time, in the order they were made (A B
    A B ... for a pair), on their targets; stops early when a series is cancelled. A
    redelivered task goes on where the last one stopped: finished runs are not claimed again."""
    statuses = []
    while True:
        if RunSeries.objects.filter(pk__in=series_ids, cancel_requested=True).exists():
            break
        run_id = (
            BenchmarkRun.objects.filter(series_id__in=series_ids, status=RunStatus.PENDING)
            .order_by("pk")
            .values_list("pk", flat=True)
            .first()
        )
        if run_id is None:
            break
        statuses.append(execute_run(run_id))
    return statuses
