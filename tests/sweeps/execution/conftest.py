"""Fixtures of the sweep execution tests: a node managed by the live test console with a real
agent (subprocess) heartbeating every 0.3 s, in front of a simulator whose steps take a known
time, and the session's real Celery worker executing the sweeps.

The simulator's steps are stretched to about 20 ms (`--sim-base-step-s 0.02` over the
tiny-test preset, whose other costs are tens of microseconds), so a request of 8 output tokens
takes 8 steps, about 165 ms, whether one or sixteen run together: the capacity of the node is
(requests in flight) / 165 ms, which the hand calculations of the tests use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_agent.sim.testing import free_port, run_sim_process
from tests.rollouts.rollout_helpers import Agent, spawn_agent
from tests.sweeps.execution.sweep_helpers import MODEL, SIM_FLAGS, SweptNode
from tests.waiting import wait_for


@pytest.fixture(scope="session")
def slow_step_sim() -> Iterator[str]:
    """A simulator the attached agents share (tier-config sweeps restart nothing)."""
    with run_sim_process(MODEL, ("--max-num-seqs", "64", *SIM_FLAGS), preset=None) as url:
        yield url


HEARTBEAT_S = 0.3


@pytest.fixture
def fast_beats(settings: Any) -> None:
    # The live server runs in this process, so the setting reaches the heartbeat replies.
    settings.TIERGATE_HEARTBEAT_INTERVAL_S = HEARTBEAT_S


@pytest.fixture
def swept_node(
    live_server: Any, fast_beats: None, slow_step_sim: str, tmp_path: Path
) -> Iterator[Callable[..., SweptNode]]:
    """swept_node(tier_config=..., launch_args=None) -> a node desiring (and running) those
    versions under a real agent: attached to the shared simulator, or, given launch args,
    running its own simulator through the agent's supervisor (managed mode)."""
    from console.fleet import services as fleet_services
    from console.fleet.choices import EndpointKind
    from console.fleet.models import Endpoint, Node
    from console.tuning.services import create_launch_profile, create_tier_config

    started: list[Agent] = []

    def make(config: dict[str, Any], launch_args: dict[str, Any] | None = None) -> SweptNode:
        name = f"sweep-{len(started) + 1:02d}"
        node, token = fleet_services.create_node(name, ["test"], None)
        tier = create_tier_config(name=f"{name}-tiers", config=config, message="base")
        profile = None
        if launch_args is not None:
            profile = create_launch_profile(name=f"{name}-engine", args=launch_args, message="base")
        fleet_services.set_desired([node], tier_config=tier, launch_profile=profile, reason="test")
        engine_cmd = None
        if launch_args is not None:
            engine_cmd = f"vllm serve {MODEL} --port {free_port()} " + " ".join(SIM_FLAGS)
        agent = spawn_agent(
            name,
            token,
            live_server.url,
            tmp_path,
            engine_url=None if engine_cmd else slow_step_sim,
            engine_cmd=engine_cmd,
        )
        started.append(agent)
        agent.wait_ready(30)

        def ready() -> bool:
            row = Node.objects.get(pk=node.pk)
            applied = row.applied_tier_config_id == tier.pk and (
                profile is None or row.applied_launch_profile_id == profile.pk
            )
            return applied and row.status() == "healthy"

        wait_for(ready, timeout=40, what=f"{name} to apply its versions and be healthy")
        endpoint = wait_for(
            lambda: Endpoint.objects.filter(node=node, kind=EndpointKind.GATEWAY).first(),
            what=f"{name}'s gateway endpoint",
        )
        node.refresh_from_db()
        return SweptNode(node, agent, endpoint, tier, profile)

    yield make
    for agent in started:
        agent.stop()
