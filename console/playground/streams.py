"""One streamed chat completion against an OpenAI-compatible endpoint, timed as it arrives.

`stream_chat` yields a `Delta` per non-empty chunk and ends with one `Outcome`. Timing is the
console's own (send -> first non-empty delta of any kind: content, reasoning or tool call),
so it includes the network between the console and the endpoint; TPOT follows
docs/architecture.md#benchmarks, `(e2e - ttft) / (completion_tokens - 1)`, with the token count from
the server's `usage`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from loadgen.client import endpoint_url
from loadgen.sse import SSEDecoder

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 120.0
MAX_TEXT_CHARS = 200_000  # what a side keeps; a runaway answer is cut, not stored whole


@dataclass
class Delta:
    content: str = ""
    reasoning: str = ""


@dataclass
class Outcome:
    text: str = ""
    reasoning: str = ""
    error: str = ""
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # The tier a Tiergate gateway served the request in (its `X-Tiergate-Tier` answer header);
    # empty for an endpoint that is not a gateway.
    tier: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def error_text(status: int, body: bytes) -> str:
    """The message of an OpenAI-shaped (or vLLM-shaped) error body, else its start."""
    try:
        obj = json.loads(body)
    except ValueError:
        return f"HTTP {status}: {body[:300].decode(errors='replace')}"
    if isinstance(obj, dict):
        inner = obj.get("error", obj)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if isinstance(message, str) and message:
            return f"HTTP {status}: {message}"
    return f"HTTP {status}: {str(obj)[:300]}"


def _delta_of(obj: dict[str, Any]) -> Delta:
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return Delta()
    delta = choices[0].get("delta")
    if not isinstance(delta, dict):
        return Delta()
    content = delta.get("content")
    thinking = delta.get("reasoning_content") or delta.get("reasoning")
    calls = delta.get("tool_calls")
    text = content if isinstance(content, str) else ""
    if calls and not text:
        text = json.dumps(calls)  # shown as it came: the page is for looking, not parsing
    return Delta(text, thinking if isinstance(thinking, str) else "")


def _usage(obj: dict[str, Any], outcome: Outcome) -> None:
    usage = obj.get("usage")
    if not isinstance(usage, dict):
        return
    for name in ("prompt_tokens", "completion_tokens"):
        value = usage.get(name)
        if type(value) is int and value >= 0:
            setattr(outcome, name, value)


def stream_chat(
    base_url: str,
    api_key: str,
    body: dict[str, Any],
    *,
    tier: str = "",
    transport: httpx.BaseTransport | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Iterator[Delta | Outcome]:
    headers = {"Accept": "text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    if tier:
        headers["X-Tiergate-Tier"] = tier
    payload = {**body, "stream": True, "stream_options": {"include_usage": True}}
    outcome = Outcome()
    timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    first: float | None = None
    sent = clock()
    try:
        with (
            httpx.Client(timeout=timeout, transport=transport) as client,
            client.stream(
                "POST", endpoint_url(base_url, "chat"), json=payload, headers=headers
            ) as response,
        ):
            outcome.tier = response.headers.get("x-tiergate-tier", "")[:50]
            if response.status_code != 200:
                outcome.error = error_text(response.status_code, response.read())
                yield outcome
                return
            decoder = SSEDecoder()
            for chunk in response.iter_raw():
                for event in decoder.feed(chunk):
                    if event.data.strip() == "[DONE]":
                        continue
                    try:
                        obj = json.loads(event.data)
                    except ValueError:
                        outcome.error = f"not JSON in the stream: {event.data[:200]!r}"
                        continue
                    if not isinstance(obj, dict):
                        continue
                    if "error" in obj:
                        outcome.error = error_text(200, event.data.encode())
                        continue
                    _usage(obj, outcome)
                    delta = _delta_of(obj)
                    if delta.content or delta.reasoning:
                        if first is None:
                            first = clock()
                        if len(outcome.text) + len(outcome.reasoning) < MAX_TEXT_CHARS:
                            outcome.text += delta.content
                            outcome.reasoning += delta.reasoning
                        yield delta
    except httpx.HTTPError as exc:
        outcome.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    end = clock()
    if first is not None:
        outcome.ttft_ms = (first - sent) * 1000
        outcome.e2e_ms = (end - sent) * 1000
        tokens = outcome.completion_tokens
        if tokens is not None and tokens > 1:
            outcome.tpot_ms = (end - first) * 1000 / (tokens - 1)
    elif not outcome.error:
        outcome.error = "the stream ended without a token"
    yield outcome
