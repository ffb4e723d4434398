"""Launch profile rollouts restart the engine through the agent's supervisor; a profile whose
engine does not start is rolled back, with the engine's own error on the rollout."""

from __future__ import annotations

from typing import Any

from gpu_agent.sim.testing import free_port
from tests.rollouts.rollout_helpers import run_rollout, timeline
from tests.waiting import wait_for


def test_a_profile_whose_engine_fails_to_start_is_rolled_back_with_the_engines_error(
    fleet: Any,
) -> None:
    from console.fleet.models import Node
    from console.fleet.services import set_desired
    from console.tuning.rollouts import services
    from console.tuning.services import create_launch_profile

    port = free_port()
    ((node, agent),) = fleet(1, engine_cmd=f"vllm serve demo --port {port} --sim-preset tiny-test")
    good = create_launch_profile(name="sim", args={"model": "demo", "max_num_seqs": 32})
    set_desired([node], launch_profile=good, reason="test start")
    wait_for(
        lambda: Node.objects.get(pk=node.pk).applied_launch_profile_id == good.pk,
        timeout=20,
        what="the first profile to be applied",
    )
    # A value this engine's parser takes but the engine refuses when it starts: the console's
    # check against the node's parser (engine_check.py) cannot tell.
    bad = create_launch_profile(
        name="sim",
        args={"model": "demo", "max_num_seqs": 64, "extra_args": ["--sim-time-scale=-1"]},
    )
    rollout = run_rollout(
        services.create_rollout(
            launch_profile=bad, canary_count=1, convergence_timeout_s=20, start=False
        )
    )
    assert rollout.state == "rolled_back", timeline(rollout)
    part = rollout.nodes.get()
    assert part.prev_launch_profile_id == good.pk
    assert (
        "engine exited" in part.error and "--sim-time-scale must be a positive number" in part.error
    )
    node.refresh_from_db()
    assert node.desired_launch_profile_id == good.pk and node.applied_launch_profile_id == good.pk
    assert (
        agent.status()["engine"]["args"]["max_num_seqs"] == 32
    )  # the good profile is running again
    assert node.health["engine"] == "ok"
