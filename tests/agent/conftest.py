"""Fixtures for the agent's tests: a shared simulator, two shared standalone agents, and a
fake console per test (see agent_helpers.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from gpu_agent.sim.testing import run_sim_process
from gpu_agent.testing import AgentProcess
from tests.agent.agent_helpers import (
    KEYS,
    MODEL,
    FakeConsole,
    queue,
    standalone_args,
    start_agent,
    tier_config,
    write_json,
)


@pytest.fixture(scope="session")
def sim_url() -> Iterator[str]:
    args = ("--sim-preset", "tiny-test", "--max-num-seqs", "64", "--scheduling-policy", "priority")
    with run_sim_process(MODEL, args) as url:
        yield url


@pytest.fixture(scope="session")
def agent(sim_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    """A standalone agent with roomy tiers, shared by the read-only gateway tests."""
    tmp = tmp_path_factory.mktemp("agent")
    with start_agent(standalone_args(tmp, sim_url, tier_config()), tmp / "agent.log") as proc:
        yield proc


@pytest.fixture(scope="session")
def tight_agent(sim_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    """One request at the engine at a time, so the queue order is visible; a "small" tier
    that holds one queued request, a "brief" one whose requests wait 200 ms at most."""
    tmp = tmp_path_factory.mktemp("tight")
    config = tier_config(
        {"max_in_flight": 1, "max_awaiting_first_token": 1},
        small=queue(4, max_queue_depth=1),
        brief=queue(5, queue_timeout_ms=200),
    )
    keys = [{**KEYS[0], "tiers": ["online", "batch", "offline", "small", "brief"]}]
    args = standalone_args(tmp, sim_url, config)
    write_json(tmp / "keys.json", keys)
    with start_agent(args, tmp / "agent.log") as proc:
        yield proc


@pytest.fixture
async def console() -> AsyncIterator[FakeConsole]:
    fake = FakeConsole()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()
