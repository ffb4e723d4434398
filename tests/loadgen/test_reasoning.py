"""Thinking and tool-calling answers: their first reasoning or tool-call delta is their first
token (TTFT), and the reasoning tokens that usage reports are recorded apart."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from gpu_agent.sim.testing import run_sim_process
from loadgen import WorkloadSpec, run_workload
from tests.loadgen.test_streams import one

CannedFactory = Callable[[bytes], Awaitable[str]]  # the canned_server fixture


def event(delta: dict[str, object] | None, usage: dict[str, object] | None = None) -> bytes:
    body: dict[str, object] = {"id": "chatcmpl-1", "object": "chat.completion.chunk"}
    body["choices"] = [] if delta is None else [{"index": 0, "delta": delta}]
    if usage is not None:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


CALL = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}


async def test_reasoning_and_tool_call_deltas_are_tokens(canned_server: CannedFactory) -> None:
    body = (
        event({"role": "assistant", "content": ""})
        + event({"reasoning_content": "Let"})
        + event({"reasoning": " me"})
        + event({"content": None, "tool_calls": [CALL]})
        + event({"content": None, "tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]})
        + event(
            None,
            {
                "prompt_tokens": 4,
                "completion_tokens": 4,
                "completion_tokens_details": {"reasoning_tokens": 2},
            },
        )
        + b"data: [DONE]\n\n"
    )
    sample = await one(await canned_server(body))
    assert sample.error is None
    assert sample.ttft is not None and sample.itl.count == 3
    assert (sample.content_chunks, sample.reasoning_chunks) == (4, 2)
    assert (sample.output_tokens, sample.reasoning_tokens) == (4, 2)


async def test_without_reasoning_in_usage_the_count_stays_unknown(
    canned_server: CannedFactory,
) -> None:
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "completion_tokens_details": None}
    body = event({"reasoning_content": "x"}) + event(None, usage) + b"data: [DONE]\n\n"
    sample = await one(await canned_server(body))
    assert sample.error is None and sample.ttft is not None
    assert sample.reasoning_tokens is None and sample.reasoning_chunks == 1


async def test_a_run_against_a_thinking_engine_times_the_first_reasoning_token() -> None:
    args = ("--sim-preset", "tiny-test", "--sim-reasoning-tokens", "1000")
    with run_sim_process("m", args) as url:
        spec = WorkloadSpec(base_url=url + "/v1", model="m", concurrency=2, requests=6)
        result = await run_workload(spec)
    assert all(s.ok for s in result.samples), result.samples[0].error
    # The whole answer is reasoning: there is no content token, yet every request has a TTFT.
    assert all(s.ttft is not None and s.ttft <= (s.e2e or 0) for s in result.samples)
    assert all(s.reasoning_tokens == s.output_tokens == s.reasoning_chunks for s in result.samples)
    overall = result.summary["overall"]
    assert overall["reasoning_tokens"] == overall["output_tokens"] > 0
    assert overall["ttft_s"]["p50"] is not None
