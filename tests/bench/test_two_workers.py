"""Two real Celery workers on one queue (the configured broker: Redis in CI's first pass) run
benchmarks side by side: every run is executed exactly once, however many times its message
is delivered, and the work spreads over both workers."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from console.bench import services, tasks
from console.bench.choices import RunStatus
from console.bench.models import BenchmarkRun, RequestSample
from tests.production.workers import discard, start_worker
from tests.waiting import wait_for

pytestmark = pytest.mark.slow
RUNS = 4
WORKLOAD = {"concurrency": 2, "duration_s": 3, "prompt_tokens": 16, "max_tokens": 8}
# Celery's line for a finished task: "Task bench.run_benchmark[ID] succeeded in 3.1s: 'skipped'"
FINISHED = re.compile(r"Task bench\.run_benchmark\[([0-9a-f-]+)\] succeeded in [0-9.]+s: '(\w+)'")


def test_two_workers_run_concurrent_benchmarks_once_each(
    transactional_db: None, endpoint: Any, operator: Any, tmp_path: Path
) -> None:
    queue = f"bench-two-workers-{uuid.uuid4().hex[:8]}"  # no other worker takes these
    workers = [start_worker(name, [queue], tmp_path) for name in ("bench-a", "bench-b")]
    try:
        for worker in workers:
            worker.wait_ready()
        runs = [
            services.create_run(endpoint=endpoint, user=operator, enqueue=False, workload=WORKLOAD)
            for _ in range(RUNS)
        ]
        for run in runs:
            tasks.run_benchmark.apply_async((run.pk,), queue=queue, task_id=run.celery_task_id)
        # Each message once more, as a broker redelivering or a double click would.
        for run in runs:
            tasks.run_benchmark.apply_async((run.pk,), queue=queue)

        def finished() -> list[tuple[str, str]]:
            lines = [m for w in workers for m in FINISHED.findall(w.output())]
            return lines if len(lines) == 2 * RUNS else []

        results = wait_for(finished, 90, "every message to be handled")
    finally:
        discard(workers)

    assert sorted(r for _, r in results) == ["skipped"] * RUNS + ["succeeded"] * RUNS
    by_worker = [FINISHED.findall(w.output()) for w in workers]
    # Both took a share: a worker holds at most two runs at once (concurrency 2, prefetch 1).
    assert all(any(r == "succeeded" for _, r in mine) for mine in by_worker), by_worker
    for run in runs:
        run.refresh_from_db()
        assert run.status == RunStatus.SUCCEEDED, run.status_reason
        samples = RequestSample.objects.filter(run=run).count()
        assert samples == run.requests_done > 0
        assert run.summary["overall"]["count"] == samples
    assert BenchmarkRun.objects.filter(status=RunStatus.RUNNING).count() == 0
