"""A worker killed mid-run: the run is marked failed by the lost-worker sweep, never left
running; a redelivered task finds the run taken and does nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from console.bench import execution, lifecycle, services, tasks
from console.bench.choices import RunStatus
from console.bench.models import BenchmarkRun
from tests.bench.conftest import ROOT
from tests.conftest import test_database_url
from tests.waiting import wait_for

pytestmark = pytest.mark.slow
QUEUE = "bench-lost-worker-test"


def test_a_killed_worker_leaves_the_run_failed_once_detected(
    transactional_db: None,
    endpoint: Any,
    operator: Any,
    tmp_path: Path,
) -> None:
    env = {**os.environ, "DATABASE_URL": test_database_url()}
    log = tmp_path / "worker.log"
    with open(log, "ab") as out:
        # Its own queue, so no other test worker takes the task; one process (solo pool), so
        # SIGKILL takes the run down with it.
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "console",
                "worker",
                "--pool",
                "solo",
                "-Q",
                QUEUE,
                "--without-mingle",
                "--without-gossip",
                "--loglevel",
                "INFO",
                "--hostname",
                f"lost-{os.getpid()}@%h",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        run = services.create_run(
            endpoint=endpoint,
            user=operator,
            enqueue=False,
            workload={"concurrency": 2, "duration_s": 60, "prompt_tokens": 16, "max_tokens": 8},
        )
        tasks.run_benchmark.apply_async((run.pk,), queue=QUEUE, task_id=run.celery_task_id)
        wait_for(
            lambda: BenchmarkRun.objects.filter(
                pk=run.pk, status=RunStatus.RUNNING, requests_done__gt=0
            ).exists(),
            40,
            f"the run to make progress; worker log:\n{log.read_text(errors='replace')}",
        )
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()

    # Fresh heartbeat: the sweep leaves it alone for now.
    assert tasks.detect_lost_runs() == []
    assert BenchmarkRun.objects.get(pk=run.pk).status == RunStatus.RUNNING
    # A minute without progress (the clock moved on for the run's heartbeat):
    BenchmarkRun.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=90)
    )
    assert tasks.detect_lost_runs() == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.status_reason.startswith("worker lost")
    assert run.finished_at is not None
    # The broker redelivering the unacknowledged task changes nothing.
    assert execution.execute_run(run.pk) == "skipped"
    assert BenchmarkRun.objects.get(pk=run.pk).status == RunStatus.FAILED


def test_the_sweep_uses_the_heartbeat_age(transactional_db: None, endpoint: Any) -> None:
    run = services.create_run(
        endpoint=endpoint, enqueue=False, workload={"concurrency": 1, "requests": 1}
    )
    now = timezone.now()
    assert lifecycle.claim(run.pk, now=now)
    assert not lifecycle.claim(run.pk, now=now)
    assert lifecycle.mark_lost_runs(now=now + timedelta(seconds=59)) == []
    assert lifecycle.mark_lost_runs(now=now + timedelta(seconds=61)) == [run.pk]
    # A task that finishes late cannot overwrite the sweep's decision.
    assert not lifecycle.finish(run.pk, RunStatus.SUCCEEDED)
    assert BenchmarkRun.objects.get(pk=run.pk).status == RunStatus.FAILED


def test_beat_runs_the_sweep_every_thirty_seconds() -> None:
    from django.conf import settings

    from console.celery import app

    entry = settings.CELERY_BEAT_SCHEDULE["bench-detect-lost-runs"]
    assert entry == {"task": "bench.detect_lost_runs", "schedule": 30.0}
    assert "bench.detect_lost_runs" in app.tasks and "bench.run_benchmark" in app.tasks
