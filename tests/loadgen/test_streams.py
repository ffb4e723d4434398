"""What one request records for odd or broken streams, through a real socket."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from loadgen import RequestSample, WorkloadSpec, run_workload

CannedFactory = Callable[[bytes], Awaitable[str]]  # the canned_server fixture


def chunk(
    content: str | None = None, usage: dict[str, int] | None = None, rid: str = "chatcmpl-1"
) -> bytes:
    body: dict[str, object] = {
        "id": rid,
        "object": "chat.completion.chunk",
        "choices": [] if content is None else [{"index": 0, "delta": {"content": content}}],
    }
    if usage is not None:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\r\n\r\n"


async def one(base_url: str) -> RequestSample:
    spec = WorkloadSpec(base_url=base_url, model="m", concurrency=1, requests=1)
    result = await run_workload(spec)
    assert len(result.samples) == 1
    return result.samples[0]


async def test_a_complete_stream_takes_tokens_from_usage(canned_server: CannedFactory) -> None:
    body = (
        b": comment\n\n"
        + chunk("")
        + chunk("Hel")
        + chunk("lo")
        + chunk(usage={"prompt_tokens": 9, "completion_tokens": 3})
        + b"data: [DONE]\n\n"
    )
    sample = await one(await canned_server(body))
    assert sample.error is None
    assert sample.status == 200
    assert sample.response_id == "chatcmpl-1"
    assert (sample.prompt_tokens, sample.output_tokens, sample.content_chunks) == (9, 3, 2)
    assert not sample.usage_missing
    assert sample.ttft is not None and sample.e2e is not None and sample.ttft <= sample.e2e
    assert sample.itl.count == 1


async def test_missing_usage_falls_back_to_chunks_and_is_flagged(
    canned_server: CannedFactory,
) -> None:
    sample = await one(await canned_server(chunk("a") + chunk("b") + b"data: [DONE]\n\n"))
    assert sample.error is None
    assert sample.usage_missing
    assert sample.output_tokens == 2


async def test_abrupt_close_before_done_is_an_error(canned_server: CannedFactory) -> None:
    sample = await one(await canned_server(chunk("a") + chunk("b")))
    assert sample.error == "stream ended before [DONE]"
    assert sample.ttft is None


async def test_an_error_event_is_an_error(canned_server: CannedFactory) -> None:
    body = (
        chunk("a")
        + b'event: error\ndata: {"error": {"message": "engine died"}}\n\n'
        + b"data: [DONE]\n\n"
    )
    sample = await one(await canned_server(body))
    assert sample.error == "engine died"


async def test_an_error_object_in_a_data_event_is_an_error(canned_server: CannedFactory) -> None:
    body = chunk("a") + b'data: {"error": {"message": "out of KV blocks", "code": 500}}\n\n'
    sample = await one(await canned_server(body))
    assert sample.error == "out of KV blocks"


async def test_invalid_json_in_a_data_event_is_an_error(canned_server: CannedFactory) -> None:
    sample = await one(await canned_server(b"data: {not json\n\ndata: [DONE]\n\n"))
    assert sample.error is not None and sample.error.startswith("invalid JSON in stream")


async def test_a_refused_connection_is_recorded_not_raised() -> None:
    sample = await one("http://127.0.0.1:9/v1")
    assert sample.error is not None and "Connect" in sample.error
    assert sample.status is None


async def test_malformed_chunks_are_the_requests_error_and_no_sample_is_lost(
    canned_server: CannedFactory,
) -> None:
    cases = [
        (
            chunk("a") + b'data: {"usage": {"completion_tokens": "7"}}\n\n',
            "usage.completion_tokens must be a non-negative integer, got '7'",
        ),
        (b'data: {"usage": 5}\n\n', "usage must be an object"),
        (b'data: {"choices": "x"}\n\n', "stream chunk: choices must be a list of objects"),
        (
            b'data: {"choices": [{"delta": "oops"}]}\n\n',
            "stream chunk: choices[0].delta must be an object",
        ),
    ]
    for body, error in cases:
        base = await canned_server(body + b"data: [DONE]\n\n")
        spec = WorkloadSpec(base_url=base, model="m", concurrency=2, requests=4)
        result = await run_workload(spec)
        assert len(result.samples) == 4, error  # every request recorded, none swallowed
        assert {s.error for s in result.samples} == {error}
        assert result.summary["overall"]["error_rate"] == 1.0
