"""One OpenAI-compatible request, timed from send to [DONE] on kernel receive times.

The HTTP client is our own thin layer over httptools (wire.py) rather than aiohttp or httpx:
chosen by measurement, for a per-token CPU cost that stays small as load grows and for
receive times that do not include the client's own lag (docs/performance.md, "Load
generator accuracy"; lab/NOTES.md, "Measuring").
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from typing import Any

from loadgen.pool import Pool
from loadgen.prompts import PlannedRequest
from loadgen.sse import SSEDecoder
from loadgen.stats import itl_stats
from loadgen.types import RequestSample
from loadgen.wire import WireError

ERROR_TEXT_LIMIT = 500
MAX_OTHER_BODY = 16 * 1024 * 1024  # a non-streamed or error body larger than this is cut


def endpoint_url(base_url: str, endpoint: str) -> str:
    """`http://h:p/v1`, `http://h:p/v1/` and `http://h:p` all give `http://h:p/v1/<endpoint>`."""
    base = base_url.rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    return f"{base}/chat/completions" if endpoint == "chat" else f"{base}/completions"


def request_headers(api_key: str | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def _error_message(obj: Any) -> str:
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            return str(err.get("message") or err)[:ERROR_TEXT_LIMIT]
        return str(err)[:ERROR_TEXT_LIMIT]
    return str(obj)[:ERROR_TEXT_LIMIT]


class _StreamState:
    """Folds decoded SSE events of one response into content times, usage and errors."""

    __slots__ = (
        "chat",
        "done",
        "error",
        "first_merged",
        "merged_gaps",
        "output_tokens",
        "prompt_tokens",
        "reasoning_chunks",
        "reasoning_tokens",
        "response_id",
        "times",
    )

    def __init__(self, chat: bool) -> None:
        self.chat = chat
        self.done = False
        self.error: str | None = None
        self.prompt_tokens: int | None = None
        self.output_tokens: int | None = None
        self.reasoning_tokens: int | None = None  # usage.completion_tokens_details, if given
        self.reasoning_chunks = 0
        self.response_id: str | None = None
        self.times: list[float] = []
        # Events that share one kernel time reached the socket in one segment (wire.py,
        # receive.py): their gaps are not wire times.
        self.merged_gaps = 0
        self.first_merged: bool | None = None  # decided by the event after the first token

    def on_event(self, data: str, event: str, now: float) -> None:
        if not data:
            return  # a bare `data:` event carries nothing (SSE allows it; no server means it)
        if self.first_merged is None and self.times:
            self.first_merged = now == self.times[0]  # its segment took in a later one
        if self.done:
            self.error = "data after [DONE]"
            return
        if data == "[DONE]":
            self.done = True
            return
        try:
            obj = json.loads(data)
        except ValueError:
            self.error = f"invalid JSON in stream: {data[:100]!r}"
            return
        if event == "error":
            self.error = _error_message(obj)
            return
        if not isinstance(obj, dict):
            self.error = f"unexpected stream payload: {data[:100]!r}"
            return
        if obj.get("error"):
            self.error = _error_message(obj)
            return
        if self.response_id is None:
            self.response_id = _response_id(obj)
        choices = obj.get("choices")
        if choices:
            choice = choices[0] if isinstance(choices, list) else None
            if not isinstance(choice, dict):
                self.error = "stream chunk: choices must be a list of objects"
                return
            if self.chat:
                delta = choice.get("delta") or {}
                if not isinstance(delta, dict):
                    self.error = "stream chunk: choices[0].delta must be an object"
                    return
                # A token is any non-empty delta: content, reasoning (vLLM's
                # `reasoning_content`, `reasoning` in newer releases) or tool calls (content
                # null), so a thinking or tool-calling answer's first token times its TTFT.
                content = delta.get("content")
                if not content:
                    thinking = delta.get("reasoning_content") or delta.get("reasoning")
                    if thinking:
                        self.reasoning_chunks += 1
                    content = thinking or delta.get("tool_calls")
            else:
                content = choice.get("text")
            if content:
                if self.times and self.times[-1] == now:
                    self.merged_gaps += 1
                self.times.append(now)
        usage = obj.get("usage")
        if usage:
            self.read_usage(usage)

    def read_usage(self, usage: Any) -> None:
        """Token counts from a `usage` object; a malformed one is the request's error."""
        if not isinstance(usage, dict):
            self.error = "usage must be an object"
            return
        counts = []
        for name in ("prompt_tokens", "completion_tokens"):
            value = usage.get(name)
            if value is not None and (type(value) is not int or value < 0):
                self.error = f"usage.{name} must be a non-negative integer, got {value!r:.40}"
                return
            counts.append(value)
        self.prompt_tokens, self.output_tokens = counts
        details = usage.get("completion_tokens_details")
        reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
        if type(reasoning) is int and reasoning >= 0:
            self.reasoning_tokens = reasoning


def _response_id(obj: dict[str, Any]) -> str | None:
    rid = obj.get("id")
    return rid[:200] if isinstance(rid, str) else None


async def send_request(
    pool: Pool,
    url: str,
    headers: dict[str, str],
    planned: PlannedRequest,
    *,
    tier_header: str,
    stream: bool,
    chat: bool,
    timeout_s: float | None = None,
) -> RequestSample:
    """One request. TTFT and every ITL gap are measured from when the request left (the send
    returned) to when the kernel received each chunk (see wire.py), so the client's own lag in
    reading does not count as latency. Time spent before the send (connecting, or the loop
    being late for the schedule) is dispatch lag, where the validity check sees it."""
    if planned.tier is not None:
        headers = {**headers, tier_header: planned.tier}
    begun_unix, begun = time.time(), time.perf_counter()
    sample = RequestSample(index=planned.index, send_time=begun_unix, tier=planned.tier)
    state = _StreamState(chat)
    decoder = SSEDecoder()
    feed, on_event = decoder.feed, state.on_event
    other: list[bytes] = []  # the body of an error or a non-streamed response

    def sink(status: int, piece: bytes, stamp: float) -> bool:
        if status != 200 or not stream:
            other.append(piece)
            return sum(map(len, other)) > MAX_OTHER_BODY
        for ev in feed(piece):
            on_event(ev.data, ev.event, stamp)
        return state.error is not None

    start = end = begun
    try:
        async with asyncio.timeout(timeout_s):
            sample.status, start, end = await pool.post(url, headers, planned.body, sink)
    except TimeoutError:
        sample.error = "timeout"
    except WireError as exc:
        sample.error = f"{type(exc).__name__}: {exc}"[:ERROR_TEXT_LIMIT]
    if sample.error is None:
        raw = b"".join(other)
        if sample.status != 200:
            text = raw.decode("utf-8", errors="replace")
            sample.error = f"HTTP {sample.status}: {text[:ERROR_TEXT_LIMIT]}"
        elif not stream:
            _read_whole(state, raw)
        elif state.error is None and not state.done:
            state.error = "stream ended before [DONE]"
    if sample.error is None:
        sample.error = state.error
    sample.send_time = begun_unix + (start - begun)
    sample.dispatch_lag = start - begun  # the runner adds the wait before the coroutine ran
    _finish(sample, state, start, end, stream=stream)
    return sample


def _read_whole(state: _StreamState, raw: bytes) -> None:
    try:
        obj = json.loads(raw)
    except ValueError:
        state.error = f"invalid JSON response: {raw[:100]!r}"
        return
    if not isinstance(obj, dict) or obj.get("error"):
        state.error = _error_message(obj)
        return
    state.response_id = _response_id(obj)
    state.read_usage(obj.get("usage") or {})
    state.done = state.error is None


def _finish(
    sample: RequestSample,
    state: _StreamState,
    start: float,
    end: float,
    *,
    stream: bool,
) -> None:
    sample.response_id = state.response_id
    sample.prompt_tokens = state.prompt_tokens
    sample.reasoning_tokens = state.reasoning_tokens
    sample.reasoning_chunks = state.reasoning_chunks
    if sample.error is not None:
        return
    sample.merged_gaps, sample.first_token_merged = state.merged_gaps, bool(state.first_merged)
    times = state.times
    sample.e2e = end - start
    sample.content_chunks = len(times) if stream else 0
    if stream and times:
        sample.ttft = times[0] - start
        gaps = [b - a for a, b in itertools.pairwise(times)]
        sample.itl = itl_stats(gaps)
        # Kept for the run's pooled ITL percentiles; the runner drops them afterwards
        # unless the spec asks to keep them.
        sample.itl_raw = gaps
    if state.output_tokens is None:
        sample.usage_missing = True
        sample.output_tokens = sample.content_chunks if stream else None
    else:
        sample.output_tokens = state.output_tokens
    if sample.ttft is not None and sample.output_tokens and sample.output_tokens > 1:
        sample.tpot = (sample.e2e - sample.ttft) / (sample.output_tokens - 1)
