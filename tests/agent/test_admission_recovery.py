"""The recovery reserve (issue 16, item 4; scheduler/reserve.py) with real processes: the
seed's config verbatim in front of the simulator (4 sequences, priority policy).

An online flood backs online up in the gateway (its oldest queued request older than 1 s); the
agent learns the engine's limit from its /metrics (running 4 while requests wait there) and
keeps half of the 4 sequences from the less urgent tiers for the next 10 s. A batch burst then
takes 2 and waits for the rest, so an online request sent after it starts at once instead of
waiting for a batch stream to end. Asserted on order and counts, not milliseconds:
without the reserve (or with the engine's limit unknown) the 4 batch streams take every
sequence and the online request's first token comes after the first batch stream has ended.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from pathlib import Path

import httpx

from gpu_agent.sim.testing import run_sim_process
from scheduler import config_to_dict, default_config
from tests.agent.agent_helpers import ALL_KEY, MODEL, engine_read, standalone_args, start_agent

SEED = config_to_dict(default_config())
_TOKEN = re.compile(r'"content":\s*"[^"]')  # a token, not the simulator's empty role chunk
SIM = ("--max-num-seqs", "4", "--scheduling-policy", "priority",
       "--sim-eos-mean-tokens", "1000000", "--sim-time-scale", "4")  # fmt: skip


async def stream(
    client: httpx.AsyncClient, url: str, tier: str, tokens: int
) -> tuple[float, float]:
    """(monotonic time of the first token, of the end of the stream)."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": tokens, "stream": True}  # fmt: skip
    headers = {"Authorization": f"Bearer {ALL_KEY}", "X-Tiergate-Tier": tier}
    first: float | None = None
    async with client.stream("POST", url + "/v1/chat/completions", json=body, headers=headers) as r:
        assert r.status_code == 200, await r.aread()
        async for line in r.aiter_lines():
            if first is None and _TOKEN.search(line):
                first = time.monotonic()
    assert first is not None
    return first, time.monotonic()


async def test_after_an_online_backlog_batch_leaves_online_half_the_sequences(
    tmp_path: Path,
) -> None:
    with (
        run_sim_process(MODEL, SIM, preset=None) as sim,
        start_agent(standalone_args(tmp_path, sim, SEED), tmp_path / "agent.log") as agent,
    ):
        async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=64)) as c:
            await engine_read(agent)  # what the agent learns on its first tick
            status = agent.status()
            assert status["reserved_slots"] == 0  # nothing pressed online yet
            assert status["engine_sequences"] is None  # the engine has not queued yet
            # The flood: 64 online streams on 4 sequences, sent over 3 s, seconds of backlog.
            flood: list[asyncio.Task[tuple[float, float]]] = []
            feeds: list[tuple[int | None, int]] = []  # (awaiting_feed, online awaiting as online)

            async def look() -> None:
                seen = await asyncio.to_thread(agent.status)
                awaiting = seen["tiers"]["online"]["awaiting_first_token"]
                feeds.append((seen["awaiting_feed"], awaiting))

            for i in range(64):
                flood.append(asyncio.create_task(stream(c, agent.url, "online", 40)))
                await asyncio.sleep(0.05)
                if i % 4 == 3:
                    await look()
            # And on while the backlog drains: a stalled machine (CI) may send the flood late,
            # so the feed may first show after the last request is sent.
            while not all(task.done() for task in flood):
                await look()
                await asyncio.sleep(0.1)
            await asyncio.gather(*flood)
            # Backed up, online requests sent during the backlog awaited in the engine as online
            # only up to the feed: what awaited before it drains, nothing is added above it.
            fed = [(f, a) for f, a in feeds if f is not None]
            assert len(fed) >= 3, feeds
            assert all(1 <= f <= 4 for f, _ in fed), feeds
            assert all(b <= max(a, f) for (_, a), (f, b) in itertools.pairwise(fed)), feeds
            status = agent.status()
            # Learned: 4 sequences; half of them kept (max_in_flight is 256, attached).
            assert (status["reserved_slots"], status["engine_sequences"]) == (2, 4), status
            assert status["max_in_flight"] == 256
            batch = [asyncio.create_task(stream(c, agent.url, "batch", 60)) for _ in range(4)]
            await asyncio.sleep(0.5)
            tiers = agent.status()["tiers"]
            assert (tiers["batch"]["in_flight"], tiers["batch"]["depth"]) == (2, 2), tiers
            online_first, _ = await stream(c, agent.url, "online", 4)
            ends = [end for _, end in await asyncio.gather(*batch)]
    assert online_first < min(ends), "the online request waited for a batch stream to end"
