"""Admission with the seed's tier config verbatim (issue 16), real processes end to end.

Engines: lab/bench_gateway.py's raw upstream (a fixed time to the first token, then 16
chunks) and the simulator. Gateway and direct requests are interleaved in one run and only
compared with each other, with margins wide enough for a loaded 2-core machine: the old
behaviour missed them by far (a 200 ms window waited out; a cap of 4 awaiting = 20 req/s with
a 200 ms TTFT).
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gpu_agent.sim.testing import free_port, run_sim_process
from gpu_agent.testing import AgentProcess
from scheduler import config_to_dict, default_config
from tests.agent.agent_helpers import (
    ALL_KEY,
    MODEL,
    ROOT,
    engine_read,
    standalone_args,
    start_agent,
)
from tests.waiting import wait_answering

SEED = config_to_dict(default_config())  # the seed's JSON verbatim (test_sched_config)


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, str]]:
    """Two raw upstreams: 20 ms and 200 ms to the first token, no limit on streams."""
    procs = []
    urls = {}
    try:
        for name, ttft in (("fast", "20"), ("slow", "200")):
            port = free_port()
            argv = [sys.executable, str(ROOT / "lab" / "bench_gateway.py"), "upstream",
                    "--port", str(port), "--ttft-ms", ttft]  # fmt: skip
            procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL))
            urls[name] = f"http://127.0.0.1:{port}"
        for url in urls.values():
            wait_answering(url + "/health")
        yield urls
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)


def seed_gateway(tmp: Path, engine_url: str) -> AgentProcess:
    return start_agent(standalone_args(tmp, engine_url, SEED), tmp / "agent.log")


async def ttft(client: httpx.AsyncClient, url: str, tier: str, max_tokens: int = 4) -> float:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": max_tokens, "stream": True}  # fmt: skip
    headers = {"Authorization": f"Bearer {ALL_KEY}", "X-Tiergate-Tier": tier}
    started = time.perf_counter()
    first: float | None = None
    async with client.stream("POST", url + "/v1/chat/completions", json=body, headers=headers) as r:
        assert r.status_code == 200, await r.aread()
        async for line in r.aiter_lines():
            if first is None and '"content":"' in line.replace(" ", ""):
                first = time.perf_counter() - started
    assert first is not None
    return first


async def interleaved(
    gateway: str, direct: str, tier: str, rate: float, count: int
) -> tuple[list[float], list[float]]:
    """`count` requests to each at `rate` req/s, alternating; TTFTs, sorted."""
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=400)) as client:
        tasks: list[asyncio.Task[float]] = []
        for i in range(count):
            tasks.append(asyncio.create_task(ttft(client, gateway, tier)))
            tasks.append(asyncio.create_task(ttft(client, direct, tier)))
            if i < count - 1:
                await asyncio.sleep(1 / rate)
        results = await asyncio.gather(*tasks)
    return sorted(results[0::2]), sorted(results[1::2])


async def test_a_lone_request_is_not_held_for_its_tiers_window(
    upstreams: dict[str, str], tmp_path: Path
) -> None:
    # The seed gives offline a 200 ms window and online 10 ms: at low load neither waits it.
    with seed_gateway(tmp_path, upstreams["fast"]) as agent:
        for tier in ("offline", "online"):
            gateway, direct = await interleaved(agent.url, upstreams["fast"], tier, 10, 20)
            added = statistics.median(gateway) - statistics.median(direct)
            assert added < 0.05 if tier == "offline" else added < 0.008, (tier, gateway, direct)


async def test_a_slow_engine_is_not_capped_at_four_per_ttft(
    upstreams: dict[str, str], tmp_path: Path
) -> None:
    # 200 ms to a first token, 60 req/s: 12 awaiting at once. The old fixed 4 allowed 20 req/s,
    # so its queue grew by 40 a second and the median TTFT passed a second.
    with seed_gateway(tmp_path, upstreams["slow"]) as agent:
        gateway, direct = await interleaved(agent.url, upstreams["slow"], "online", 60, 180)
    assert statistics.median(gateway) < statistics.median(direct) + 0.1, (gateway, direct)
    assert gateway[int(0.9 * len(gateway))] < 0.6


async def test_in_front_of_the_simulator_the_seed_config_adds_no_window(tmp_path: Path) -> None:
    args = ("--max-num-seqs", "16", "--scheduling-policy", "priority")
    with (
        run_sim_process(MODEL, args) as sim,
        seed_gateway(tmp_path, sim) as agent,
    ):
        await engine_read(agent)  # what the agent learns on its first tick
        gateway, direct = await interleaved(agent.url, sim, "offline", 10, 20)
        status = agent.status()
    assert statistics.median(gateway) - statistics.median(direct) < 0.05, (gateway, direct)
    assert status["awaiting_limit_adaptive"] is True and status["awaiting_limit"] >= 1
