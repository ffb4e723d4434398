"""A real Celery worker runs benchmarks against the simulator through a standalone agent."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from console.bench.choices import RunStatus
from console.bench.models import BenchmarkRun, RequestSample
from tests.bench.conftest import SMOKE
from tests.waiting import wait_for

pytestmark = pytest.mark.slow


def _status(pk: int) -> str:
    return BenchmarkRun.objects.values_list("status", flat=True).get(pk=pk)


def test_a_worker_runs_a_benchmark_created_through_the_api(
    transactional_db: None,
    celery_worker_proc: Any,
    endpoint: Any,
    operator: Any,
    api: Any,
) -> None:
    response = api(operator).post(
        "/api/v1/benchmarks/",
        {"endpoint": endpoint.pk, "workload": SMOKE, "label": "smoke"},
        format="json",
    )
    assert response.status_code == 201, response.content
    pk = response.json()["id"]
    assert response.json()["status"] == "pending"
    wait_for(
        lambda: _status(pk) in (RunStatus.SUCCEEDED, RunStatus.FAILED), 40, "the run to finish"
    )
    run = BenchmarkRun.objects.get(pk=pk)
    assert run.status == RunStatus.SUCCEEDED, run.status_reason
    assert RequestSample.objects.filter(run=run).count() == 24
    body = api(operator).get(f"/api/v1/benchmarks/{pk}/").json()
    assert body["progress"]["percent"] == 100.0 and body["progress"]["requests_done"] == 24
    assert body["summary"]["overall"]["errors"] == 0
    assert body["config_snapshot"]["nodes"][0]["name"] == "bench-node"
    client = Client()
    client.force_login(operator)
    page = client.get(f"/benchmarks/{pk}/")
    assert b'id="chart-cdf"' in page.content and b'id="run-figures"' in page.content
    # Through the gateway to the simulator, token times came from the kernel's receive stamps.
    assert run.validity["receive_times"] == "kernel"
    assert b"the kernel's receive times" in page.content


def test_cancel_stops_a_running_benchmark_and_keeps_what_completed(
    transactional_db: None,
    celery_worker_proc: Any,
    endpoint: Any,
    operator: Any,
    api: Any,
) -> None:
    workload = {"concurrency": 4, "duration_s": 120, "prompt_tokens": 32, "max_tokens": 16}
    pk = (
        api(operator)
        .post("/api/v1/benchmarks/", {"endpoint": endpoint.pk, "workload": workload}, format="json")
        .json()["id"]
    )
    wait_for(
        lambda: BenchmarkRun.objects.filter(
            pk=pk, status=RunStatus.RUNNING, requests_done__gt=0
        ).exists(),
        30,
        "the run to make progress",
    )
    response = api(operator).post(f"/api/v1/benchmarks/{pk}/cancel/")
    assert response.status_code == 202 and response.json()["cancel_requested"] is True
    wait_for(lambda: _status(pk) == RunStatus.CANCELLED, 15, "the run to stop")
    run = BenchmarkRun.objects.get(pk=pk)
    assert run.elapsed_s < 60  # stopped, not run to its end
    assert RequestSample.objects.filter(run=run).count() == run.summary["overall"]["count"] > 0
    assert api(operator).post(f"/api/v1/benchmarks/{pk}/cancel/").status_code == 409
