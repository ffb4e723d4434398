"""Thinking and tool-calling streams through the gateway
(docs/architecture.md#the-dispatchers-semantics): their first delta, reasoning or a tool call with
null content, is their first token, so they do not hold the awaiting-first-token slots until they
end.

The seed's tier config with `max_awaiting_first_token` 4; eight long streams whose whole
answer is reasoning (or one tool call); online requests sent while they run must still be
released at once. Before the gateway counted such deltas, the first four long streams held
every awaiting slot until they finished, and nothing else was released meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gpu_agent.sim.testing import run_sim_process
from gpu_agent.testing import AgentProcess
from tests.agent.agent_helpers import ALL_KEY, MODEL, standalone_args, start_agent
from tests.seed import seed_tiers

SEED = seed_tiers(max_awaiting_first_token=4)
LONG_STREAMS = 8
LONG_TOKENS = 5000  # several seconds at the engine
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


@pytest.fixture(scope="module")
def thinking_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    """Every chat answer of this engine is reasoning, unless the request turns thinking off;
    2 GiB of simulated GPU memory, so eight long answers fit the KV cache."""
    args = (
        "--sim-preset",
        "tiny-test",
        "--max-num-seqs",
        "64",
        "--sim-gpu-memory-bytes",
        str(2 << 30),
        "--sim-reasoning-tokens",
        "1000000",
    )
    tmp = tmp_path_factory.mktemp("thinking")
    with (
        run_sim_process(MODEL, args) as sim,
        start_agent(standalone_args(tmp, sim, SEED), tmp / "agent.log") as agent,
    ):
        yield agent


def request(kind: str, max_tokens: int) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "think it over"}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
    }
    if kind == "tool_calls":
        body |= {
            "tools": TOOLS,
            "tool_choice": "required",
            "chat_template_kwargs": {"enable_thinking": False},
        }
    return body


async def stream(client: httpx.AsyncClient, tier: str, body: dict[str, Any]) -> bytes:
    headers = {"Authorization": f"Bearer {ALL_KEY}", "X-Tiergate-Tier": tier}
    async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
        assert r.status_code == 200, await r.aread()
        return await r.aread()


@pytest.mark.parametrize("kind", ["reasoning", "tool_calls"])
async def test_long_thinking_streams_do_not_stall_admission(
    thinking_agent: AgentProcess, kind: str
) -> None:
    agent = thinking_agent
    async with httpx.AsyncClient(base_url=agent.url, timeout=60) as client:
        long = [
            asyncio.create_task(stream(client, "offline", request(kind, LONG_TOKENS)))
            for _ in range(LONG_STREAMS)
        ]
        try:
            # All eight reach the engine: each counted its first token, so the cap of four
            # awaiting it was never the limit for long.
            for _ in range(400):
                status = await asyncio.to_thread(agent.status)
                if status["in_flight"] == LONG_STREAMS:
                    break
                await asyncio.sleep(0.025)
            assert status["in_flight"] == LONG_STREAMS, status["tiers"]
            awaiting = sum(t["awaiting_first_token"] for t in status["tiers"].values())
            assert awaiting <= 4
            # Three online answers, each whole while every long stream still runs: held behind
            # them (as before), the first would only start once they had ended.
            for _ in range(3):
                answer = await stream(client, "online", request(kind, 8))
                assert not any(task.done() for task in long), "a long stream ended first"
                assert answer.rstrip().endswith(b"data: [DONE]")
                marker = b'"reasoning_content":"' if kind == "reasoning" else b'"tool_calls":[{'
                assert marker in answer
        finally:
            for task in long:
                task.cancel()
            await asyncio.gather(*long, return_exceptions=True)
    for _ in range(200):
        if (await asyncio.to_thread(agent.status))["in_flight"] == 0:
            break
        await asyncio.sleep(0.05)
