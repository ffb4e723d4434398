"""The sweep tasks' wiring: beat runs `bench.resume_sweeps`, which hands exactly the unfinished
sweeps whose lease is free or expired to a worker; a duplicate message finds the lease held."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.sweeps.api_helpers import body, make_node


def test_beat_runs_the_resume_task_and_the_worker_knows_both_tasks(settings: Any) -> None:
    from console.celery import app

    entry = settings.CELERY_BEAT_SCHEDULE["bench-resume-sweeps"]
    assert entry["task"] == "bench.resume_sweeps" and entry["schedule"] <= 10
    assert {"bench.run_sweep", "bench.resume_sweeps"} <= set(app.tasks)


def test_resume_hands_over_only_sweeps_no_live_worker_holds(
    db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from console.bench.sweeps import tasks
    from console.bench.sweeps.executor import Executor
    from console.bench.sweeps.models import Sweep
    from console.bench.sweeps.services import create_sweep

    monkeypatch.setattr(tasks, "enqueue", lambda sweep: None)
    sent: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr(tasks.run_sweep, "apply_async", lambda args, **kw: sent.append((args, kw)))
    held = create_sweep(body(make_node("gpu-a")["node"]), None)
    expired = create_sweep(body(make_node("gpu-b")["node"]), None)
    never = create_sweep(body(make_node("gpu-c")["node"]), None)
    finished = create_sweep(body(make_node("gpu-d")["node"]), None)
    assert Executor(held.pk, owner="live").claim()
    assert not Executor(held.pk, owner="other").claim()  # a duplicate message: lease held
    Sweep.objects.filter(pk=expired.pk).update(
        lease_owner="dead", lease_until=timezone.now() - timedelta(seconds=1)
    )
    Sweep.objects.filter(pk=finished.pk).update(status="succeeded")
    assert sorted(tasks.resume_sweeps()) == sorted([expired.pk, never.pk])
    assert sorted(args[0] for args, _ in sent) == sorted([expired.pk, never.pk])
    assert all(kw["time_limit"] > kw["soft_time_limit"] > 0 for _, kw in sent)
