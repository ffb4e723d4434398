"""Admission under overload (issue 16): the age bound, adaptive LIFO and the sojourn bound,
with real processes (the gateway in front of lab/bench_gateway.py's raw upstream, 60 ms to
the first token, one stream at a time, so the backlog is in the gateway and its order is the
gateway's alone).

Each test asserts on the order of answers, or on counts, never on absolute milliseconds: under
the old code (no `promote_after_ms`, `lifo_after_ms`, `shed_after_ms`; FIFO within a tier, no
default sojourn bound) the config is refused, and a FIFO order fails every assertion by far.
"""

from __future__ import annotations

import asyncio
import copy
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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

SEED = config_to_dict(default_config())
_TOKEN = re.compile(r'"content":\s*"[^"]')  # a token, not the simulator's empty role chunk


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    port = free_port()
    argv = [sys.executable, str(ROOT / "lab" / "bench_gateway.py"), "upstream",
            "--port", str(port), "--ttft-ms", "60", "--slots", "1"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_answering(url + "/health")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def gateway(tmp: Path, engine_url: str, admission: dict[str, Any], **queues: Any) -> AgentProcess:
    config = copy.deepcopy(SEED)
    config["scheduler"]["admission"] = admission
    for name, fields in queues.items():
        config["scheduler"]["queues"][name].update(fields)
    return start_agent(standalone_args(tmp, engine_url, config), tmp / "agent.log")


async def one(client: httpx.AsyncClient, url: str, tier: str) -> tuple[int, float, str | None]:
    """(status, monotonic time of the first token or of the refusal, Retry-After)."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 4, "stream": True}  # fmt: skip
    headers = {"Authorization": f"Bearer {ALL_KEY}", "X-Tiergate-Tier": tier}
    async with client.stream("POST", url + "/v1/chat/completions", json=body, headers=headers) as r:
        if r.status_code != 200:
            await r.aread()
            return r.status_code, time.monotonic(), r.headers.get("retry-after")
        first: float | None = None
        async for line in r.aiter_lines():
            if first is None and _TOKEN.search(line):
                first = time.monotonic()
        assert first is not None
        return 200, first, None


def client() -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=200))


async def test_the_age_bound_lets_an_offline_request_past_a_batch_backlog(
    upstream: str, tmp_path: Path
) -> None:
    # 20 batch requests queued (one at a time reaches the engine, ~80 ms each), then one
    # offline: strict priority serves it last (~1.6 s); promoted after 300 ms, it goes next.
    admission = {"max_in_flight": 1}
    with gateway(tmp_path, upstream, admission, offline={"promote_after_ms": 300}) as agent:
        async with client() as c:
            batch = [asyncio.create_task(one(c, agent.url, "batch")) for _ in range(20)]
            await asyncio.sleep(0.05)
            offline = await one(c, agent.url, "offline")
            done = await asyncio.gather(*batch)
    assert offline[0] == 200 and all(status == 200 for status, _, _ in done)
    after = sum(1 for _, at, _ in done if at > offline[1])
    assert after >= 8, f"only {after} of 20 batch requests were answered after the offline one"


async def test_without_an_age_bound_the_offline_request_waits_out_the_backlog(
    upstream: str, tmp_path: Path
) -> None:
    # The control for the test above: the same run with the seed's tiers alone.
    with gateway(tmp_path, upstream, {"max_in_flight": 1, "min_share": 0}) as agent:
        async with client() as c:
            batch = [asyncio.create_task(one(c, agent.url, "batch")) for _ in range(20)]
            await asyncio.sleep(0.05)
            offline = await one(c, agent.url, "offline")
            done = await asyncio.gather(*batch)
    assert sum(1 for _, at, _ in done if at > offline[1]) == 0


@pytest.mark.parametrize(("burst", "overload"), [(100, True), (30, False)])
async def test_an_online_overload_serves_the_newest_first(
    upstream: str, tmp_path: Path, burst: int, overload: bool
) -> None:
    # The seed's defaults (lifo_after_ms 1000): `burst` online at once, about 80 ms each one at
    # a time, then one more after 1.3 s, when the oldest has waited past the bound. 100 (~8 s
    # of work) is more than the engine clears in OVERLOAD_CLEAR_S (5 s): an overload, and the
    # late one is served next, not last. 30 (~2.4 s) is a backlog the engine works off soon:
    # FIFO, and the late one is served last.
    with gateway(tmp_path, upstream, {"max_in_flight": 1}) as agent:
        async with client() as c:
            older = [asyncio.create_task(one(c, agent.url, "online")) for _ in range(burst)]
            await asyncio.sleep(1.3)
            late = await one(c, agent.url, "online")
            done = await asyncio.gather(*older)
    assert late[0] == 200 and all(status == 200 for status, _, _ in done)
    after = sum(1 for _, at, _ in done if at > late[1])
    if overload:
        assert after >= 10, f"only {after} of the {burst} older requests answered after the newest"
    else:
        assert after == 0, f"{after} of the {burst} older requests answered after the newest"


async def test_the_sojourn_bound_answers_every_request_with_503_and_retry_after(
    upstream: str, tmp_path: Path
) -> None:
    # 40 online at once, about 80 ms each: those still queued after 600 ms are shed, each
    # answered 503 with Retry-After; none hangs, the first ones are served.
    admission = {"max_in_flight": 1, "lifo_after_ms": 200, "shed_after_ms": 600}
    with gateway(tmp_path, upstream, admission) as agent:
        async with client() as c:
            started = time.monotonic()
            done = await asyncio.wait_for(
                asyncio.gather(*(one(c, agent.url, "online") for _ in range(40))), 30
            )
            status = agent.status()
    served = [d for d in done if d[0] == 200]
    shed = [d for d in done if d[0] == 503]
    assert len(served) + len(shed) == 40 and served and len(shed) >= 10, status
    assert all(retry is not None and int(retry) >= 1 for _, _, retry in shed)
    assert max(at for _, at, _ in shed) - started < 10  # shed at ~0.6 s, not left to hang


async def test_the_minimum_share_serves_the_newest_of_a_stale_batch_backlog(
    upstream: str, tmp_path: Path
) -> None:
    # 80 online at once (~6 s of work, one stream at a time) and 10 batch just after, then one
    # more batch at 2 s. A min_share of 0.05 of the last releases gives batch about one
    # release in 20 while online floods; once batch's oldest has waited over
    # lifo_after_ms, each takes its newest request (a client still waiting, where the oldest
    # has most likely given up): the late one goes before most of the 10. Before, the share
    # took the oldest: the late one was served last of them.
    with gateway(tmp_path, upstream, {"max_in_flight": 1, "min_share": 0.05}) as agent:
        async with client() as c:
            flood = [asyncio.create_task(one(c, agent.url, "online")) for _ in range(80)]
            await asyncio.sleep(0.05)
            early = [asyncio.create_task(one(c, agent.url, "batch")) for _ in range(10)]
            await asyncio.sleep(2.0)
            late = await one(c, agent.url, "batch")
            done = await asyncio.gather(*flood, *early)
    assert late[0] == 200 and all(status == 200 for status, _, _ in done)
    after = sum(1 for _, at, _ in done[80:] if at > late[1])
    assert after >= 5, f"only {after} of the 10 older batch requests were served after the late one"
    online_after = sum(1 for _, at, _ in done[:80] if at > late[1])
    assert online_after >= 20, (
        f"the late batch request waited out the online flood ({online_after})"
    )


async def test_a_backlog_sent_on_as_the_next_tier_lets_a_new_request_overtake_it_in_the_engine(
    tmp_path: Path,
) -> None:
    # The simulator, one sequence at a time, priority policy, ~65 ms a request: 150 online at
    # once (~10 s of work, an overload: more than the engine clears in 5 s), then one more
    # after 2 s. From 1 s on the backlog is stale (waited over lifo_after_ms): its releases go
    # to the engine as batch requests, so the new one, sent as online, overtakes the 6 waiting
    # in the engine's queue. Before, it also waited behind them (vLLM's queue is FIFO within a
    # priority): 6 or more older ones first.
    args = ("--max-num-seqs", "1", "--scheduling-policy", "priority",
            "--sim-decode-s-per-seq", "0.02")  # fmt: skip
    with (
        run_sim_process(MODEL, args) as sim,
        gateway(tmp_path, sim, {"max_awaiting_first_token": 6}) as agent,
    ):
        await engine_read(agent)  # what the agent learns on its first tick
        async with client() as c:
            burst = [asyncio.create_task(one(c, agent.url, "online")) for _ in range(150)]
            await asyncio.sleep(2.0)
            sent = time.monotonic()
            late = await one(c, agent.url, "online")
            done = await asyncio.gather(*burst)
    assert late[0] == 200 and all(status == 200 for status, _, _ in done)
    ahead = sum(1 for _, at, _ in done if sent < at < late[1])
    assert ahead <= 3, f"{ahead} older requests got their first token while the new one waited"
