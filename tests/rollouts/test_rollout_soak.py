"""The canary wave soaks before the next wave starts, on real agents: the next wave waits for
the soak, and a canary that goes quiet during it stops the rollout, which rolls back."""

from __future__ import annotations

from typing import Any

from tests.rollouts.rollout_helpers import ExecutorThread, timeline
from tests.waiting import wait_for

UNGUARDED = {"guard_max_ttft_p99_regression_pct": None, "guard_max_error_rate": None}


def test_the_next_wave_starts_only_after_the_canary_has_soaked(fleet: Any, versions: Any) -> None:
    from console.tuning.rollouts import services
    from tests.rollouts.rollout_helpers import run_rollout

    _, v2 = versions
    fleet(2)
    rollout = run_rollout(
        services.create_rollout(
            tier_config=v2,
            canary_count=1,
            canary_soak_s=2.0,
            convergence_timeout_s=15,
            start=False,
            **UNGUARDED,
        )
    )
    assert rollout.state == "succeeded", timeline(rollout)
    canary, second = rollout.nodes.order_by("position")
    assert (second.applying_at - canary.healthy_at).total_seconds() >= 2.0
    text = timeline(rollout)
    assert "wave 1 canary soaking; watching its health for 2 s" in text
    assert "wave 1 stayed healthy for 2 s" in text


def test_a_canary_that_goes_quiet_during_its_soak_is_rolled_back(fleet: Any, versions: Any) -> None:
    from console.fleet.models import Node
    from console.tuning.rollouts import services
    from console.tuning.rollouts.models import Rollout

    v1, v2 = versions
    (canary, canary_agent), (other, other_agent) = fleet(2)
    rollout = services.create_rollout(
        tier_config=v2,
        canary_count=1,
        canary_soak_s=30.0,
        convergence_timeout_s=15,
        start=False,
        **UNGUARDED,
    )
    thread = ExecutorThread(rollout.pk)
    thread.start()
    wait_for(
        lambda: Rollout.objects.get(pk=rollout.pk).guard_since is not None,
        timeout=20,
        what="the canary to start soaking",
    )
    canary_agent.kill()
    assert thread.finish(timeout=20) == "rolled_back"
    rollout.refresh_from_db()
    assert f"{canary.name} unhealthy while being watched" in rollout.reason, timeline(rollout)
    parts = {p.node_id: p for p in rollout.nodes.all()}
    assert parts[other.pk].applying_at is None  # never reached
    assert Node.objects.get(pk=canary.pk).desired_tier_config_id == v1.pk
    assert other_agent.applied() == v1.pk
