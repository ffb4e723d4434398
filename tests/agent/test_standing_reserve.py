"""The standing reserve (`admission.reserved_slots`) with real processes: the seed's tiers in
front of the simulator (4 sequences, priority policy), 2 of 4 slots reserved for online.

Static (the default, docs/architecture.md#the-dispatchers-semantics), batch never takes the last 2
slots, online or not. With `reserve_follows_arrivals`, the reserve holds one slot per online request
of the last 2 s: a batch burst sent just after one online request leaves one slot free, and 2 s
later the gateway hands that slot to the waiting batch request while every stream still runs.
Asserted on the agent's status (what is in flight, queued, reserved), not on milliseconds.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from gpu_agent.sim.testing import run_sim_process
from scheduler import config_to_dict, default_config
from tests.agent.agent_helpers import ALL_KEY, MODEL, engine_read, standalone_args, start_agent

SIM = ("--max-num-seqs", "4", "--scheduling-policy", "priority",
       "--sim-eos-mean-tokens", "1000000", "--sim-time-scale", "4")  # fmt: skip
LONG = 400  # tokens: a batch stream outlives the test's 2 s lapse several times over


def config(follows: bool) -> dict[str, Any]:
    doc = config_to_dict(default_config())
    doc["scheduler"]["admission"] = {
        "max_in_flight": 4,
        "reserved_slots": 2,
        "reserve_follows_arrivals": follows,
        "recovery_reserve": 0,  # only the standing reserve here
    }
    return doc


async def send(client: httpx.AsyncClient, url: str, tier: str, tokens: int) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": tokens, "stream": True}  # fmt: skip
    headers = {"Authorization": f"Bearer {ALL_KEY}", "X-Tiergate-Tier": tier}
    async with client.stream("POST", url + "/v1/chat/completions", json=body, headers=headers) as r:
        assert r.status_code == 200, await r.aread()
        async for _ in r.aiter_lines():
            pass


def batch_and_reserve(agent: Any) -> tuple[int, int, int]:
    """(batch in flight, batch queued, slots reserved for online) as the agent reports them."""
    status = agent.status()
    batch = status["tiers"]["batch"]
    return batch["in_flight"], batch["depth"], status["reserved_slots"]


async def settled(agent: Any, expected: tuple[int, int, int], within: float) -> None:
    deadline = time.monotonic() + within
    seen = await asyncio.to_thread(batch_and_reserve, agent)
    while seen != expected and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        seen = await asyncio.to_thread(batch_and_reserve, agent)
    assert seen == expected, seen


@pytest.mark.parametrize("follows", [False, True])
async def test_the_standing_reserve_holds_or_follows_online_arrivals(
    tmp_path: Path, follows: bool
) -> None:
    with (
        run_sim_process(MODEL, SIM, preset=None) as sim,
        start_agent(standalone_args(tmp_path, sim, config(follows)), tmp_path / "a.log") as agent,
    ):
        async with httpx.AsyncClient(timeout=120) as client:
            await engine_read(agent)  # what the agent learns on its first tick
            await send(client, agent.url, "online", 2)  # one online request, answered at once
            sent = time.monotonic()
            batch = [asyncio.create_task(send(client, agent.url, "batch", LONG)) for _ in range(4)]
            if follows:
                # One online arrival in the last 2 s: one slot kept, 3 batch streams start.
                await settled(agent, (3, 1, 1), within=1.0)
                assert time.monotonic() - sent < 2.0  # seen before the reserve could lapse
                # Its arrival ages out: the 4th batch request starts, though every stream is
                # still running.
                await settled(agent, (4, 0, 0), within=4.0)
            else:
                await settled(agent, (2, 2, 2), within=1.0)
                await asyncio.sleep(2.5)  # past the 2 s that a following reserve would wait
                assert await asyncio.to_thread(batch_and_reserve, agent) == (2, 2, 2)
            assert not any(task.done() for task in batch), "a batch stream ended too soon"
            for task in batch:
                task.cancel()
            await asyncio.gather(*batch, return_exceptions=True)
