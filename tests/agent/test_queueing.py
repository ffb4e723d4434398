"""Queueing end to end through a gateway that lets one request reach the engine at a time:
priority order, a full tier's 429, and disconnects that free their slot or queue place."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

import httpx

from gpu_agent.testing import AgentProcess
from tests.agent.agent_helpers import ALL_KEY, MODEL

URL = "/v1/chat/completions"


def body(max_tokens: int, stream: bool = True) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": "go"}],
        "max_tokens": max_tokens,
        "stream": stream,
        "ignore_eos": True,
    }


def headers(tier: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {ALL_KEY}", "X-Tiergate-Tier": tier}


async def first_token_at(client: httpx.AsyncClient, tier: str, max_tokens: int) -> float:
    """Stream a request to the end; return when its first content chunk arrived."""
    first: float | None = None
    async with client.stream("POST", URL, json=body(max_tokens), headers=headers(tier)) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if (
                first is None
                and line.startswith("data: {")
                and '"content":"' in line.replace('"content":""', "")
            ):
                first = time.monotonic()
    assert first is not None
    return first


# How long a state may take to show: far past what it takes, so a loaded machine only waits.
WAIT_S = 30.0
# A request that holds the one engine slot until the test lets it go (by disconnecting), so
# the queue behind it stays as the test built it however slowly the test's own steps run.
HOLDER_TOKENS = 5000


async def hold_the_slot(client: httpx.AsyncClient, agent: AgentProcess) -> asyncio.Task[float]:
    holder = asyncio.create_task(first_token_at(client, "offline", HOLDER_TOKENS))
    await wait_in_flight(agent)
    return holder


async def let_go(holder: asyncio.Task[float]) -> None:
    """Disconnect the holder: the gateway cancels it upstream and frees its slot."""
    holder.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await holder


async def wait_status(
    agent: AgentProcess, ready: Callable[[dict[str, Any]], bool], what: str
) -> None:
    deadline = time.monotonic() + WAIT_S
    while True:
        status: dict[str, Any] = await asyncio.to_thread(agent.status)
        if ready(status):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: {status}")
        await asyncio.sleep(0.01)


async def wait_idle(agent: AgentProcess) -> None:
    await wait_status(
        agent,
        lambda s: s["in_flight"] == 0 and all(t["depth"] == 0 for t in s["tiers"].values()),
        "agent not idle",
    )


async def wait_in_flight(agent: AgentProcess) -> None:
    await wait_status(agent, lambda s: s["in_flight"] == 1, "no request reached the engine")


async def wait_depth(agent: AgentProcess, tier: str, depth: int) -> None:
    await wait_status(
        agent, lambda s: s["tiers"][tier]["depth"] == depth, f"{tier} depth never {depth}"
    )


async def test_online_requests_overtake_queued_offline_ones(
    tight_agent: AgentProcess, sim_url: str
) -> None:
    await wait_idle(tight_agent)
    since = time.time()
    async with httpx.AsyncClient(base_url=tight_agent.url, timeout=30) as client:
        holder = await hold_the_slot(client, tight_agent)
        offline = [asyncio.create_task(first_token_at(client, "offline", 4)) for _ in range(3)]
        await wait_depth(tight_agent, "offline", 3)
        online = asyncio.create_task(first_token_at(client, "online", 4))
        await wait_depth(tight_agent, "online", 1)
        await let_go(holder)
        await asyncio.gather(online, *offline)
    records = httpx.get(sim_url + "/sim/v1/requests", params={"since": since}).json()["data"]
    # vLLM's `priority` reached the engine: the tier's priority number.
    assert sorted(r["priority"] for r in records) == [1, 3, 3, 3, 3]
    # Only the offline request already at the engine (the holder) started before the online
    # one, queued last. The engine's first-token times order them (a descheduled client may
    # read two streams in either order, so the client's read times would not).
    by_first_token = sorted(records, key=lambda r: r["first_token_time"])
    assert [r["priority"] for r in by_first_token] == [3, 1, 3, 3, 3], by_first_token


async def test_a_full_tier_gets_429_with_retry_after(tight_agent: AgentProcess) -> None:
    await wait_idle(tight_agent)
    async with httpx.AsyncClient(base_url=tight_agent.url, timeout=30) as client:
        holder = await hold_the_slot(client, tight_agent)
        queued = asyncio.create_task(first_token_at(client, "small", 2))
        await wait_depth(tight_agent, "small", 1)
        response = await client.post(URL, json=body(2), headers=headers("small"))
        assert response.status_code == 429
        assert int(response.headers["retry-after"]) >= 1
        assert response.json()["error"]["code"] == "queue_full"
        await let_go(holder)
        await queued
    await wait_idle(tight_agent)


async def test_a_client_that_leaves_mid_stream_frees_its_slot(
    tight_agent: AgentProcess, sim_url: str
) -> None:
    await wait_idle(tight_agent)
    request_id = f"leaver-{time.time_ns()}"
    async with httpx.AsyncClient(base_url=tight_agent.url, timeout=30) as client:
        # Long enough (several seconds at the engine) that only a freed slot lets the next in.
        leaver = {**headers("offline"), "X-Request-Id": request_id}
        async with client.stream("POST", URL, json=body(5000), headers=leaver) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: {"):
                    break
        response = await client.post(URL, json=body(3, stream=False), headers=headers("online"))
        assert response.status_code == 200
        # The engine saw the upstream request go away and aborted it.
        records = (await client.get(sim_url + "/sim/v1/requests")).json()["data"]
    [record] = [r for r in records if r["request_id"] == request_id]
    assert record["finish_reason"] == "abort" and record["output_tokens"] < 5000
    # The one slot went to the online request when the leaver's was freed, not when its 5000
    # tokens would have been done (the engine's own clock: no wall-time bound to break).
    [online] = [r for r in records if r["arrival_time"] > record["arrival_time"]]
    assert online["arrival_time"] >= record["finish_time"]
    assert online["finish_reason"] != "abort"
    await wait_idle(tight_agent)


async def test_a_client_that_leaves_the_queue_gives_up_its_place(tight_agent: AgentProcess) -> None:
    await wait_idle(tight_agent)
    async with httpx.AsyncClient(base_url=tight_agent.url, timeout=30) as client:
        holder = await hold_the_slot(client, tight_agent)
        waiting = asyncio.create_task(client.post(URL, json=body(3), headers=headers("batch")))
        await wait_depth(tight_agent, "batch", 1)
        waiting.cancel()
        await wait_depth(tight_agent, "batch", 0)
        status = await asyncio.to_thread(tight_agent.status)
        assert status["tiers"]["batch"]["cancelled"] == 1
        await let_go(holder)
    await wait_idle(tight_agent)


def test_it_serves_a_sse_stream_unchanged(tight_agent: AgentProcess) -> None:
    with httpx.stream(
        "POST", tight_agent.url + URL, json=body(3), headers=headers("online"), timeout=10
    ) as response:
        lines = [line for line in response.iter_lines() if line]
    assert response.headers["content-type"].startswith("text/event-stream")
    assert lines[-1] == "data: [DONE]"
    assert all(line.startswith("data: ") for line in lines)
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
