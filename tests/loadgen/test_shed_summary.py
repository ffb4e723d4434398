"""Shed apart from errors in the load generator's summary (issue 57, item 5): a request the
gateway refused for overload (its 429 `queue_full`, its 503 `queue_timeout`, in the error body
gpu_agent/errors.py writes) is counted as `shed` per tier, not as an error; any other failure,
another server's 429 or 503 included, stays an error."""

from __future__ import annotations

import json

import pytest

from loadgen import RequestSample, summarize, timeseries
from loadgen.stats import OVERALL, is_shed, validity


def _refusal(status: int, code: str, message: str = "busy") -> str:
    """The error text loadgen/client.py records for a non-200 answer of the gateway."""
    error = {"message": message, "type": "service_unavailable", "code": code}
    return f"HTTP {status}: {json.dumps({'error': error})}"


def _sample(index: int, tier: str, status: int = 200, error: str | None = None) -> RequestSample:
    s = RequestSample(index=index, send_time=100.0 + index * 0.1, tier=tier, status=status)
    if error is None:
        s.ttft, s.e2e, s.output_tokens, s.content_chunks = 0.1, 0.5, 4, 4
    else:
        s.error, s.e2e = error, 0.01
    return s


QUEUE_TIMEOUT = _refusal(503, "queue_timeout", "tier 'online': queue_timeout: waited over 30 s")
QUEUE_FULL = _refusal(429, "queue_full", "tier 'batch': queue_full: queue batch is full")


@pytest.mark.parametrize(
    ("status", "error", "shed"),
    [
        (503, QUEUE_TIMEOUT, True),
        (429, QUEUE_FULL, True),
        (503, _refusal(503, "engine_down"), False),  # the engine unreachable: an error
        (429, _refusal(429, "engine_busy"), False),  # the engine's own 429
        (503, _refusal(503, "shutting_down"), False),  # the gateway stopping, not overload
        (503, "HTTP 503: upstream connect error", False),  # another proxy's 503, not JSON
        (500, QUEUE_TIMEOUT.replace("HTTP 503", "HTTP 500"), False),  # the code alone is not it
        (None, "timeout", False),  # the client gave up
    ],
)
def test_only_the_gateways_overload_refusals_are_shed(
    status: int | None, error: str, shed: bool
) -> None:
    sample = RequestSample(index=0, send_time=0.0, tier="online", status=status, error=error)
    assert is_shed(sample) is shed
    assert not is_shed(_sample(1, "online"))  # an answered request is never shed


def test_the_summary_counts_shed_per_tier_apart_from_errors() -> None:
    samples = [
        *(_sample(i, "online") for i in range(6)),
        *(_sample(10 + i, "online", 503, QUEUE_TIMEOUT) for i in range(3)),
        _sample(20, "online", 502, _refusal(502, "engine_error")),
        *(_sample(30 + i, "batch") for i in range(2)),
        *(_sample(40 + i, "batch", 429, QUEUE_FULL) for i in range(2)),
        _sample(50, "offline"),
    ]
    summary = summarize(samples)
    online, batch, offline, overall = (summary[t] for t in ("online", "batch", "offline", OVERALL))
    assert (online["count"], online["completed"], online["errors"], online["shed"]) == (10, 6, 1, 3)
    assert online["error_rate"] == pytest.approx(0.1) and online["shed_rate"] == pytest.approx(0.3)
    assert (batch["errors"], batch["shed"], batch["shed_rate"]) == (0, 2, 0.5)
    assert (offline["errors"], offline["shed"], offline["shed_rate"]) == (0, 0, 0.0)
    assert (overall["count"], overall["errors"], overall["shed"]) == (15, 1, 5)
    assert overall["completed"] + overall["errors"] + overall["shed"] == overall["count"]
    # The latency figures are the answered requests' alone, as before.
    assert online["ttft_s"]["count"] == 6
    # Per second too, and the client's validity still counts every unanswered request.
    rows = timeseries(samples, (100.0, 106.0))
    assert sum(r["shed"] for r in rows) == 5 and sum(r["errors"] for r in rows) == 1
    v = validity(samples, loop_lags=[0.0], cpu_s=0.1, wall_s=10.0)
    assert v["error_rate"] == pytest.approx(6 / 15)


def test_an_empty_tier_summary_has_no_shed() -> None:
    summary = summarize([])
    assert summary[OVERALL]["shed"] == 0 and summary[OVERALL]["shed_rate"] == 0.0
