"""Thinking and tool-calling answers of the simulator, in vLLM's shapes, read with the official
openai client: reasoning deltas, tool-call deltas with null content, usage's reasoning count."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from gpu_agent.sim.testing import run_sim_process

MODEL = "thinker"
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    args = ["--sim-preset", "tiny-test", "--sim-reasoning-tokens", "3"]
    with run_sim_process(MODEL, args) as url:
        yield url


@pytest.fixture
def client(base_url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=base_url + "/v1", api_key="none", max_retries=0) as c:
        yield c


def ask(
    client: openai.OpenAI, stream: bool, extra_body: dict[str, Any] | None = None, **kwargs: Any
) -> Any:
    return client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "think"}],
        max_tokens=6,
        stream=stream,
        extra_body={"ignore_eos": True, **(extra_body or {})},
        **kwargs,
    )


def test_a_streamed_answer_thinks_first_and_usage_counts_the_reasoning(
    client: openai.OpenAI,
) -> None:
    stream = ask(client, True, stream_options={"include_usage": True})
    kinds, usage = [], None
    for chunk in stream:
        if chunk.choices:
            delta = chunk.choices[0].delta.model_dump()
            if delta.get("reasoning_content"):
                kinds.append("reasoning")
            elif delta.get("content"):
                kinds.append("content")
        if chunk.usage is not None:
            usage = chunk.usage
    assert kinds == ["reasoning"] * 3 + ["content"] * 3
    assert usage is not None and usage.completion_tokens == 6
    assert usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == 3


def test_a_whole_answer_carries_its_reasoning_apart(client: openai.OpenAI) -> None:
    answer = ask(client, False)
    message = answer.choices[0].message.model_dump()
    assert len(message["reasoning_content"].split()) == 3
    assert len(message["content"].split()) == 3


def test_thinking_can_be_turned_off_per_request(client: openai.OpenAI) -> None:
    answer = ask(client, False, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    message = answer.choices[0].message.model_dump()
    assert "reasoning_content" not in message or not message["reasoning_content"]
    assert len(message["content"].split()) == 6


def test_a_required_tool_choice_streams_one_call_with_null_content(base_url: str) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "look it up"}],
        "max_tokens": 5,
        "ignore_eos": True,
        "stream": True,
        "tools": TOOLS,
        "tool_choice": "required",
        "chat_template_kwargs": {"enable_thinking": False},
    }
    with httpx.stream("POST", base_url + "/v1/chat/completions", json=body) as response:
        lines = [line[6:] for line in response.iter_lines() if line.startswith("data: {")]
    deltas = [json.loads(line)["choices"][0] for line in lines]
    assert deltas[0]["delta"] == {"role": "assistant", "content": ""}
    calls = [d["delta"] for d in deltas[1:]]
    assert all(d["content"] is None and len(d["tool_calls"]) == 1 for d in calls)
    first = calls[0]["tool_calls"][0]
    assert first["index"] == 0 and first["type"] == "function" and first["id"]
    assert first["function"]["name"] == "lookup"
    arguments = "".join(d["tool_calls"][0]["function"]["arguments"] for d in calls)
    assert len(json.loads(arguments)["text"].split()) == 5
    assert deltas[-1]["finish_reason"] == "length"


def test_a_named_tool_choice_answers_with_that_call(client: openai.OpenAI) -> None:
    tools = [*TOOLS, {"type": "function", "function": {"name": "other"}}]
    answer = ask(
        client,
        False,
        tools=tools,
        tool_choice={"type": "function", "function": {"name": "other"}},
    )
    choice = answer.choices[0]
    assert choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.function.name == "other"
    assert len(json.loads(call.function.arguments)["text"].split()) == 3


def test_a_tool_choice_naming_no_tool_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match=r"tool_choice\.function\.name"):
        ask(client, False, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "x"}})
