"""Rollbacks leave nothing behind, on real agents: every node the rollout touched ends exactly
as it was before, "no desired version" included, whether the rollout failed on it, timed out on
it, or is rolled back by hand after it succeeded."""

from __future__ import annotations

from typing import Any

from gpu_agent.sim.testing import free_port
from tests.rollouts.rollout_helpers import QUICK, run_rollout, timeline
from tests.waiting import wait_for


def test_a_failed_profile_on_a_node_without_one_leaves_no_desire_and_no_error(
    fleet: Any,
) -> None:
    from console.fleet.models import Node
    from console.tuning.rollouts import services
    from console.tuning.services import create_launch_profile

    port = free_port()
    ((node, agent),) = fleet(1, engine_cmd=f"vllm serve demo --port {port} --sim-preset tiny-test")
    assert node.desired_launch_profile_id is None  # runs its command line's engine, nothing else
    # A value the engine's parser takes (so the console's check against the node's report lets
    # it through) but the engine refuses when it starts.
    bogus = create_launch_profile(
        name="bogus-extra",
        args={"model": "demo", "extra_args": ["--sim-time-scale=-1"]},
    )
    rollout = run_rollout(
        services.create_rollout(
            launch_profile=bogus, canary_count=1, convergence_timeout_s=20, start=False, **QUICK
        )
    )
    assert rollout.state == "rolled_back", timeline(rollout)
    part = rollout.nodes.get()
    assert part.prev_launch_profile_id is None and "--sim-time-scale" in part.error
    assert "no desired version again" in timeline(rollout)
    node = Node.objects.get(pk=node.pk)
    assert node.desired_launch_profile_id is None and node.applied_launch_profile_id is None
    # The agent forgot the error of a version no longer desired; the node is healthy, and the
    # fleet page and the rollout's node table say so from the same rule.
    wait_for(
        lambda: "launch_profile" not in agent.status()["apply_errors"],
        what="the agent to drop the apply error",
    )
    wait_for(lambda: Node.objects.get(pk=node.pk).status() == "healthy", what="node healthy")
    assert agent.status()["desired_seen"]["launch_profile"] is None


def test_a_never_seen_target_is_left_out_by_default(fleet: Any, versions: Any) -> None:
    from console.fleet.services import create_node
    from console.tuning.rollouts import services

    _, v2 = versions
    ((live, agent),) = fleet(1)
    ghost, _ = create_node("ghost", ["test"], None)  # its agent never connects
    rollout = run_rollout(
        services.create_rollout(tier_config=v2, convergence_timeout_s=15, start=False, **QUICK)
    )
    assert rollout.state == "succeeded", timeline(rollout)
    assert [p.node_id for p in rollout.nodes.all()] == [live.pk]
    assert rollout.excluded_nodes == [{"id": ghost.pk, "name": "ghost", "status": "never seen"}]
    assert "left out, stale or never seen: ghost (never seen)" in timeline(rollout)
    ghost.refresh_from_db()
    assert ghost.desired_tier_config_id is None
    assert agent.applied() == v2.pk


def test_refuse_names_the_stale_targets(fleet: Any, versions: Any) -> None:
    import pytest

    from console.fleet.services import create_node
    from console.tuning.rollouts import services

    _, v2 = versions
    fleet(1)
    create_node("ghost", [], None)
    with pytest.raises(services.RolloutError) as caught:
        services.create_rollout(tier_config=v2, stale_targets="refuse", start=False, **QUICK)
    assert caught.value.field == "stale_targets" and "ghost (never seen)" in caught.value.message


def test_an_included_never_seen_node_times_out_and_is_restored_to_no_desired_version(
    fleet: Any, versions: Any
) -> None:
    from console.fleet.models import Node
    from console.fleet.services import create_node
    from console.tuning.rollouts import services

    v1, v2 = versions
    ((live, agent),) = fleet(1)
    ghost, _ = create_node("ghost", ["test"], None)
    rollout = run_rollout(
        services.create_rollout(
            tier_config=v2,
            stale_targets="include",
            canary_count=0,
            convergence_timeout_s=2,
            start=False,
            **QUICK,
        )
    )
    assert rollout.state == "rolled_back", timeline(rollout)
    assert "ghost" in rollout.reason and "last seen never" in rollout.reason
    # Nothing left behind: the ghost desires nothing again (it would have taken v2 on its first
    # connect), the live node is back on v1.
    assert Node.objects.get(pk=ghost.pk).desired_tier_config_id is None
    wait_for(lambda: agent.applied() == v1.pk, what="the live node back on v1")
    assert Node.objects.get(pk=live.pk).desired_tier_config_id == v1.pk


def test_rolling_back_by_hand_goes_back_to_what_ran_then_to_no_desired_version(
    fleet: Any, versions: Any
) -> None:
    from console.fleet.desired import clear_desired
    from console.fleet.models import Node
    from console.tuning.rollouts import services

    v1, v2 = versions
    ((node, agent),) = fleet(1)
    clear_desired([node], ["tier_config"])  # it runs v1, and the console desires nothing
    rollout = run_rollout(
        services.create_rollout(tier_config=v2, convergence_timeout_s=15, start=False, **QUICK)
    )
    assert rollout.state == "succeeded" and agent.applied() == v2.pk, timeline(rollout)
    part = rollout.nodes.get()
    assert (part.prev_tier_config_id, part.prev_applied_tier_config_id) == (None, v1.pk)

    rollback = run_rollout(services.rollback_rollout(rollout, start=False))
    assert rollback.state == "succeeded", timeline(rollback)
    back = rollback.nodes.get()
    assert back.target_tier_config_id == v1.pk and back.unset_tier_config
    node = Node.objects.get(pk=node.pk)
    assert (node.desired_tier_config_id, node.applied_tier_config_id) == (None, v1.pk)
    assert agent.applied() == v1.pk
    # The unset desire reaches the agent with its next heartbeat reply.
    wait_for(
        lambda: agent.status()["desired_seen"]["tier_config"] is None,
        what="the agent to see no desired tier config",
    )
