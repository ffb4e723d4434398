"""A Celery worker killed (SIGKILL) in the middle of a rollout: once its lease runs out the
rollout is resumed from the rows it left, and no node has its desired versions set twice.

The killed worker is a real `celery worker` process. The one that resumes runs the same task
body in a thread of the test (ExecutorThread): booting a second worker would only add seconds
on a 2-core CI machine, and the resume depends on nothing but the rows and the lease."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from tests.conftest import test_database_url
from tests.rollouts.rollout_helpers import ROOT, ExecutorThread, timeline
from tests.waiting import wait_for


def start_worker(queue: str, log_path: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DATABASE_URL": test_database_url(), "TIERGATE_ROLLOUT_LEASE_S": "2"}
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "console",
                "worker",
                "--pool",
                "threads",
                "--concurrency",
                "2",
                "--loglevel",
                "INFO",
                "--without-mingle",
                "--without-gossip",
                "-Q",
                queue,
                "--hostname",
                f"{queue}-{uuid.uuid4().hex[:6]}@%h",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def test_a_worker_killed_mid_rollout_is_resumed_without_applying_twice(
    fleet: Any, versions: Any, tmp_path: Path
) -> None:
    from console.audit.models import AuditEvent
    from console.tuning.rollouts import services
    from console.tuning.rollouts.models import Rollout
    from console.tuning.rollouts.tasks import orphaned_rollouts, run_rollout

    _, v2 = versions
    nodes = fleet(2)
    # The guard's window (a short probe: no traffic of its own) holds the rollout after the canary.
    rollout = services.create_rollout(
        tier_config=v2,
        canary_count=1,
        convergence_timeout_s=15,
        guard_max_error_rate=0.5,
        guard_max_ttft_p99_regression_pct=None,
        guard_window_s=1.5,
        guard_probe_s=3.0,  # the quiet canary's probe: 30 requests, not the test's subject
        canary_soak_s=1.5,
        start=False,
    )
    queue = f"rollouts-test-{uuid.uuid4().hex[:8]}"  # its own queue: no other worker takes it
    first = start_worker(queue, tmp_path / "worker.log")
    try:
        run_rollout.apply_async((rollout.pk,), queue=queue)
        wait_for(
            lambda: Rollout.objects.get(pk=rollout.pk).guard_since is not None,
            timeout=30,
            what="the canary wave to be applied, under the first worker",
        )
        assert str(first.pid) in Rollout.objects.get(pk=rollout.pk).lease_owner
        first.send_signal(signal.SIGKILL)
        first.wait()
        wait_for(
            lambda: rollout.pk in orphaned_rollouts(),
            timeout=10,
            what="the dead worker's lease to expire",
        )
        resumed = ExecutorThread(rollout.pk)
        resumed.start()
        assert resumed.finish() == "succeeded"
    finally:
        if first.poll() is None:
            first.terminate()
            first.wait(15)
    rollout.refresh_from_db()
    assert rollout.state == "succeeded", timeline(rollout)
    assert str(first.pid) not in rollout.lease_owner
    for node, agent in nodes:
        sets = AuditEvent.objects.filter(
            object_type="fleet.node",
            object_id=str(node.pk),
            message=f"desired versions set: {rollout}",
        )
        assert sets.count() == 1, list(sets.values_list("message", flat=True))
        assert agent.applied() == v2.pk
    assert timeline(rollout).count("started") == 1
