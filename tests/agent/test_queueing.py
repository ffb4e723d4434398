"""Queueing end to end through a gateway that lets one request reach the engine at a time:
priority order, a full tier's 429, and disconnects that free their slot or queue place."""

from __future__ import annotations

import asyncio
import json
import time
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


async def wait_idle(agent: AgentProcess) -> None:
    for _ in range(200):
        status = await asyncio.to_thread(agent.status)
        if status["in_flight"] == 0 and all(t["depth"] == 0 for t in status["tiers"].values()):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"agent not idle: {status}")


async def wait_in_flight(agent: AgentProcess) -> None:
    for _ in range(200):
        if (await asyncio.to_thread(agent.status))["in_flight"] == 1:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no request reached the engine")


async def wait_depth(agent: AgentProcess, tier: str, depth: int) -> None:
    for _ in range(200):
        status = await asyncio.to_thread(agent.status)
        if status["tiers"][tier]["depth"] == depth:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{tier} depth never reached {depth}: {status['tiers']}")


async def test_online_requests_overtake_queued_offline_ones(
    tight_agent: AgentProcess, sim_url: str
) -> None:
    await wait_idle(tight_agent)
    since = time.time()
    async with httpx.AsyncClient(base_url=tight_agent.url, timeout=30) as client:
        # Long enough (~0.6 s each at the engine) that the online request is queued in time.
        offline = [asyncio.create_task(first_token_at(client, "offline", 500)) for _ in range(4)]
        # Wait until the offline ones are in: one at the engine, three queued.
        await wait_depth(tight_agent, "offline", 3)
        online = await first_token_at(client, "online", 4)
        offline_firsts = await asyncio.gather(*offline)
    # Only the offline request already at the engine started before the online one.
    assert sum(1 for t in offline_firsts if t < online) == 1, (online, offline_firsts)
    # vLLM's `priority` reached the engine: the tier's priority number.
    records = httpx.get(sim_url + "/sim/v1/requests", params={"since": since}).json()["data"]
    assert sorted(r["priority"] for r in records) == [1, 3, 3, 3, 3]


async def test_a_full_tier_gets_429_with_retry_after(tight_agent: AgentProcess) -> None:
    await wait_idle(tight_agent)
    async with httpx.AsyncClient(base_url=tight_agent.url, timeout=30) as client:
        # Seconds at the engine (its slot is back when the engine ends, not the client).
        busy = asyncio.create_task(first_token_at(client, "offline", 4000))
        await wait_in_flight(tight_agent)
        queued = asyncio.create_task(first_token_at(client, "small", 2))
        await wait_depth(tight_agent, "small", 1)
        response = await client.post(URL, json=body(2), headers=headers("small"))
        assert response.status_code == 429
        assert int(response.headers["retry-after"]) >= 1
        assert response.json()["error"]["code"] == "queue_full"
        busy.cancel()
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
        started = time.monotonic()
        response = await client.post(URL, json=body(3, stream=False), headers=headers("online"))
        assert response.status_code == 200
        assert time.monotonic() - started < 2.0
        # The engine saw the upstream request go away and aborted it.
        records = (await client.get(sim_url + "/sim/v1/requests")).json()["data"]
    [record] = [r for r in records if r["request_id"] == request_id]
    assert record["finish_reason"] == "abort" and record["output_tokens"] < 5000
    await wait_idle(tight_agent)


async def test_a_client_that_leaves_the_queue_gives_up_its_place(tight_agent: AgentProcess) -> None:
    await wait_idle(tight_agent)
    async with httpx.AsyncClient(base_url=tight_agent.url, timeout=30) as client:
        busy = asyncio.create_task(first_token_at(client, "offline", 4000))
        await wait_in_flight(tight_agent)
        waiting = asyncio.create_task(client.post(URL, json=body(3), headers=headers("batch")))
        await wait_depth(tight_agent, "batch", 1)
        waiting.cancel()
        for _ in range(100):
            status = await asyncio.to_thread(tight_agent.status)
            if status["tiers"]["batch"]["depth"] == 0:
                break
            await asyncio.sleep(0.02)
        assert status["tiers"]["batch"]["depth"] == 0
        assert status["tiers"]["batch"]["cancelled"] == 1
        busy.cancel()
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
