"""Rollouts that must stop and roll back, on real agents: an apply error on the canary, and an
agent killed mid-rollout (a timeout)."""

from __future__ import annotations

from typing import Any

from tests.rollouts.rollout_helpers import QUICK, run_rollout, timeline


def test_a_canary_that_reports_an_apply_error_stops_and_rolls_back(
    fleet: Any, versions: Any
) -> None:
    from console.tuning.models import TierConfigVersion
    from console.tuning.rollouts import services

    v1, _ = versions
    (canary, canary_agent), (other, other_agent) = fleet(2)
    # Stored past the console's validation, as a version made under another schema would be:
    # the agent's own parser refuses it.
    refused = TierConfigVersion.objects.create(
        name="tiers",
        version=3,
        message="refused by agents",
        config={"scheduler": {"queues": {"online": {"priority": "first"}}}},
    )
    rollout = run_rollout(
        services.create_rollout(
            tier_config=refused, canary_count=1, convergence_timeout_s=15, start=False, **QUICK
        )
    )
    assert rollout.state == "rolled_back", timeline(rollout)
    parts = {p.node_id: p for p in rollout.nodes.all()}
    assert parts[canary.pk].state == "rolled_back"
    assert "priority" in parts[canary.pk].error  # the agent's own error text
    assert "priority" in rollout.reason and canary.name in rollout.reason
    assert parts[other.pk].state == "pending" and parts[other.pk].applying_at is None
    canary.refresh_from_db()
    other.refresh_from_db()
    assert canary.desired_tier_config_id == v1.pk and other.desired_tier_config_id == v1.pk
    assert canary_agent.applied() == v1.pk and other_agent.applied() == v1.pk


def test_an_agent_killed_mid_rollout_times_out_and_the_others_roll_back(
    fleet: Any, versions: Any
) -> None:
    from console.fleet.models import Node
    from console.tuning.rollouts import services

    v1, v2 = versions
    nodes = fleet(2)
    (dead, dead_agent) = nodes[1]
    dead_agent.kill()  # in the second wave: the canary goes through first
    rollout = run_rollout(
        services.create_rollout(
            tier_config=v2, canary_count=1, convergence_timeout_s=2, start=False, **QUICK
        )
    )
    assert rollout.state == "rolled_back", timeline(rollout)
    assert dead.name in rollout.reason and "timed out" in rollout.reason
    assert set(rollout.nodes.values_list("state", flat=True)) == {"rolled_back"}
    for node, agent in nodes[:1]:
        assert agent.applied() == v1.pk
        assert Node.objects.get(pk=node.pk).applied_tier_config_id == v1.pk
    # The dead node wants v1 again and will take it when its agent returns.
    assert Node.objects.get(pk=dead.pk).desired_tier_config_id == v1.pk
    assert "not reporting" in timeline(rollout)
