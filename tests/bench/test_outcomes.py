"""Honest status: a run whose requests failed ends failed (or completed with errors), with an
error breakdown on the page and in the API."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from console.bench import execution, services
from console.bench.choices import RunStatus
from console.bench.outcomes import MAX_KINDS, error_breakdown, run_outcome
from loadgen import RequestSample
from tests.bench.conftest import SMOKE
from tests.conftest import api_client_for


def sample(i: int, status: int | None = 200, error: str | None = None, **kw: Any) -> RequestSample:
    return RequestSample(index=i, send_time=100.0 + i, status=status, error=error, **kw)


def test_errors_are_grouped_by_status_and_message_with_their_first_example() -> None:
    samples = [
        sample(0),
        sample(3, 503, 'HTTP 503: {"error": "queue timeout after 500 ms"}', tier="batch"),
        sample(1, None, "ClientConnectorError: connect to 127.0.0.1:9 refused"),
        sample(2, None, "ClientConnectorError: connect to 127.0.0.1:9 refused", warmup=True),
        sample(4, 503, 'HTTP 503: {"error": "queue timeout after 750 ms"}'),
        sample(5, 503, 'HTTP 503: {"error": "queue timeout after 750 ms"}'),
    ]
    rows = error_breakdown(samples)
    assert [(r["status"], r["count"], r["warmup"]) for r in rows] == [(503, 3, 0), (None, 2, 1)]
    assert rows[0]["first"] == {"index": 3, "tier": "batch", "send_time": 103.0}
    assert rows[0]["message"].endswith('500 ms"}')  # the first example's own text
    assert rows[1]["first"]["index"] == 1
    many = [sample(i, 500, f"error kind {chr(65 + i)}") for i in range(MAX_KINDS + 5)]
    rows = error_breakdown(many)
    assert len(rows) == MAX_KINDS and rows[-1]["count"] == 6
    assert sum(r["count"] for r in rows) == MAX_KINDS + 5


def test_the_share_of_failed_requests_decides_the_status() -> None:
    ok = [sample(i) for i in range(100)]
    assert run_outcome(ok) == (RunStatus.SUCCEEDED, "")
    three = ok[:97] + [sample(i, 429, "HTTP 429: queue full") for i in range(97, 100)]
    status, reason = run_outcome(three)
    assert status == RunStatus.WITH_ERRORS
    assert reason.startswith("3 of 100 requests failed (3.0%): HTTP 429: HTTP 429: queue full")
    ten = ok[:90] + [sample(i, 502, "HTTP 502: engine error") for i in range(90, 100)]
    assert run_outcome(ten)[0] == RunStatus.FAILED
    # Warmup failures do not count against the measured requests.
    cold = [sample(i, None, "timeout", warmup=True) for i in range(5)] + ok
    assert run_outcome(cold)[0] == RunStatus.SUCCEEDED
    assert run_outcome([]) == (RunStatus.FAILED, "no request was sent")


@pytest.mark.slow
def test_a_run_against_a_dead_port_fails_and_shows_why(
    transactional_db: None, plain_endpoint: Any, operator: Any
) -> None:
    run = services.create_run(endpoint=plain_endpoint, workload=SMOKE, user=operator, enqueue=False)
    assert execution.execute_run(run.pk) == RunStatus.FAILED
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.status_reason.startswith("24 of 24 requests failed (100.0%): no response: ")
    [kind] = run.error_breakdown
    assert kind["count"] == 24 and kind["status"] is None
    assert "refused" in kind["message"].lower() or "connect" in kind["message"].lower()
    assert run.conditions["prefix_cache_reset"] == "not tried: external endpoint"

    body = api_client_for(operator).get(f"/api/v1/benchmarks/{run.pk}/").json()
    assert body["status"] == "failed" and body["error_breakdown"][0]["count"] == 24
    client = Client()
    client.force_login(operator)
    html = client.get(f"/benchmarks/{run.pk}/").content.decode()
    assert 'id="error-breakdown"' in html and "Succeeded" not in html
    assert kind["message"][:30] in html
