"""Two real Celery workers on one queue (the configured broker: Redis in CI's first pass) run
rollouts side by side: each rollout executes once however often its message is delivered, no
node has its desired versions set twice, and when the worker holding a rollout is killed the
other worker resumes it under the lease."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.production.workers import Worker, discard, start_worker
from tests.rollouts.rollout_helpers import QUICK, timeline
from tests.waiting import wait_for

pytestmark = pytest.mark.slow
LEASE = {"TIERGATE_ROLLOUT_LEASE_S": "2"}


def sets_of(rollout: Any, node: Any) -> int:
    from console.audit.models import AuditEvent

    count: int = AuditEvent.objects.filter(
        object_type="fleet.node",
        object_id=str(node.pk),
        message=f"desired versions set: {rollout}",
    ).count()
    return count


def state(rollout: Any) -> str:
    rollout.refresh_from_db()
    return str(rollout.state)


def test_two_workers_run_concurrent_rollouts_once_and_survive_a_kill(
    fleet: Any, versions: Any, tmp_path: Path
) -> None:
    from console.tuning.rollouts import services
    from console.tuning.rollouts.choices import NodeSelection
    from console.tuning.rollouts.tasks import orphaned_rollouts, run_rollout

    v1, v2 = versions
    nodes = fleet(2)  # one node per rollout: few processes on a small CI machine
    queue = f"rollouts-two-workers-{uuid.uuid4().hex[:8]}"
    workers = [start_worker(n, [queue], tmp_path, env=LEASE) for n in ("roll-a", "roll-b")]
    try:
        for worker in workers:
            worker.wait_ready()
        halves = [[nodes[0][0]], [nodes[1][0]]]
        rollouts = [
            services.create_rollout(
                tier_config=v2,
                selection=NodeSelection.NODES,
                nodes=half,
                canary_count=1,
                convergence_timeout_s=20,
                start=False,
                **QUICK,
            )
            for half in halves
        ]
        for rollout in rollouts * 2:  # every message twice
            run_rollout.apply_async((rollout.pk,), queue=queue)
        for rollout in rollouts:
            wait_for(lambda r=rollout: state(r) == "succeeded", 60, f"{rollout} to succeed")
        for rollout, half in zip(rollouts, halves, strict=True):
            assert timeline(rollout).count("started") == 1, timeline(rollout)
            for node in half:
                assert sets_of(rollout, node) == 1
        for _, agent in nodes:
            assert agent.applied() == v2.pk

        # Back to v1 on the first node, held by the guard after the canary: kill its worker.
        back = services.create_rollout(
            tier_config=v1,
            selection=NodeSelection.NODES,
            nodes=halves[0],
            canary_count=1,
            convergence_timeout_s=20,
            guard_window_s=2.0,
            guard_probe_s=3.0,  # the quiet canary's probe: 30 requests, not the test's subject
            start=False,
            **{**QUICK, "guard_max_error_rate": 0.5},
        )
        run_rollout.apply_async((back.pk,), queue=queue)
        wait_for(
            lambda: state(back) == "running" and back.guard_since is not None,
            40,
            "the canary wave to be applied",
        )
        holder = holder_of(back, workers)
        holder.kill()
        wait_for(lambda: back.pk in orphaned_rollouts(), 15, "the dead worker's lease to expire")
        # What beat's resume_rollouts does for an orphaned rollout, sent to this test's queue.
        run_rollout.apply_async((back.pk,), queue=queue)
        wait_for(lambda: state(back) == "succeeded", 60, "the other worker to finish it")
    finally:
        discard(workers)
    survivor = next(w for w in workers if w is not holder)
    assert str(survivor.process.pid) in back.lease_owner
    assert timeline(back).count("started") == 1, timeline(back)
    for node in halves[0]:
        assert sets_of(back, node) == 1
    assert nodes[0][1].applied() == v1.pk


def holder_of(rollout: Any, workers: list[Worker]) -> Worker:
    rollout.refresh_from_db()
    held = [w for w in workers if str(w.process.pid) in rollout.lease_owner]
    assert len(held) == 1, (rollout.lease_owner, [w.process.pid for w in workers])
    return held[0]
