"""Fixtures of the rollout tests: a simulated engine shared by the session, and a small fleet
of real agents (subprocesses) heartbeating every 0.3 s to the live test console."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_agent.sim.testing import run_sim_process
from tests.rollouts.rollout_helpers import MODEL, Agent, spawn_agent, tier_config
from tests.waiting import wait_for

HEARTBEAT_S = 0.3


@pytest.fixture(scope="session")
def sim_url() -> Iterator[str]:
    with run_sim_process(MODEL, ("--max-num-seqs", "64")) as url:
        yield url


@pytest.fixture
def fast_beats(settings: Any) -> None:
    # The live server runs in this process, so the setting reaches the heartbeat replies.
    settings.TIERGATE_HEARTBEAT_INTERVAL_S = HEARTBEAT_S


@pytest.fixture
def versions(transactional_db: None) -> tuple[Any, Any]:
    """Tier config "tiers" v1 (roomy) and v2 (a slightly different online tier)."""
    from console.tuning.services import create_tier_config

    v1 = create_tier_config(name="tiers", config=tier_config(online_wait_ms=1), message="v1")
    v2 = create_tier_config(name="tiers", config=tier_config(online_wait_ms=2), message="v2")
    return v1, v2


@pytest.fixture
def fleet(
    live_server: Any, fast_beats: None, sim_url: str, tmp_path: Path, versions: tuple[Any, Any]
) -> Iterator[Callable[..., list[tuple[Any, Agent]]]]:
    """fleet(n, **agent_kwargs) -> [(node, agent)]: n nodes desiring v1, each with a running
    agent (attached to the shared simulator unless told otherwise) that has applied v1."""
    from console.fleet import services
    from console.fleet.models import Node

    started: list[Agent] = []

    def make(
        count: int, *, prefix: str = "gpu", engine_cmd: str | None = None
    ) -> list[tuple[Any, Agent]]:
        out = []
        for index in range(count):
            name = f"{prefix}-{len(started) + 1:02d}"
            node, token = services.create_node(name, ["test", f"zone-{index % 2}"], None)
            services.set_desired([node], tier_config=versions[0], reason="test start")
            agent = spawn_agent(
                name,
                token,
                live_server.url,
                tmp_path,
                engine_url=None if engine_cmd else sim_url,
                engine_cmd=engine_cmd,
            )
            started.append(agent)
            out.append((node, agent))
        for node, agent in out:  # started all at once: they boot in parallel
            agent.wait_ready()
            wait_for(
                lambda n=node: Node.objects.get(pk=n.pk).applied_tier_config_id == versions[0].pk,
                what=f"{node.name} to apply v1",
            )
            node.refresh_from_db()
        return out

    yield make
    for agent in started:
        agent.stop()
