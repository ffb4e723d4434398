"""Over HTTP: vLLM's `priority` orders the queue under --scheduling-policy priority."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from gpu_agent.sim.testing import run_sim_process


async def complete(client: httpx.AsyncClient, name: str, priority: int, tokens: int) -> None:
    body = {
        "model": "m",
        "prompt": f"{name} says hi",
        "max_tokens": tokens,
        "ignore_eos": True,
        "priority": priority,
    }
    response = await client.post("/v1/completions", json=body, headers={"x-request-id": name})
    assert response.status_code == 200, response.text


async def scenario(base_url: str) -> dict[str, dict[str, Any]]:
    since = time.time()
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        # "hog" holds the only seat; the others queue behind it in arrival order.
        tasks = [asyncio.create_task(complete(client, "hog", 5, 150))]
        for name, priority in (("low-1", 10), ("low-2", 10), ("urgent", -1)):
            await asyncio.sleep(0.02)
            tasks.append(asyncio.create_task(complete(client, name, priority, 5)))
        await asyncio.gather(*tasks)
        records = (await client.get("/sim/v1/requests", params={"since": since})).json()["data"]
    return {record["request_id"]: record for record in records}


def served_order(records: dict[str, dict[str, Any]]) -> list[str]:
    return sorted(records, key=lambda name: records[name]["first_token_time"])


def test_urgent_request_jumps_the_queue_under_priority_policy() -> None:
    flags = ["--scheduling-policy", "priority", "--max-num-seqs", "1", "--sim-time-scale", "2"]
    with run_sim_process("m", flags) as base_url:
        records = asyncio.run(scenario(base_url))
        steps = httpx.get(base_url + "/sim/v1/gpu").json()["steps"]
    assert served_order(records) == ["hog", "urgent", "low-1", "low-2"]
    assert records["urgent"]["priority"] == -1
    # 150 decode steps of ~1.1 modelled ms, played twice as slowly.
    hog = records["hog"]
    assert hog["finish_time"] - hog["first_token_time"] > 2 * 150 * 0.001
    assert 0.7 < steps["measured_s"] / steps["modelled_s"] < 1.5


def test_priority_is_ignored_under_fcfs() -> None:
    with run_sim_process("m", ["--max-num-seqs", "1"]) as base_url:
        records = asyncio.run(scenario(base_url))
    assert served_order(records) == ["hog", "low-1", "low-2", "urgent"]
    assert {record["priority"] for record in records.values()} == {0}
