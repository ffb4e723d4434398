"""The task body in this process against a real agent + simulator: results stored, the run
page and charts rendered, exports."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from django.test import Client

from console.bench import execution, services
from console.bench.choices import RunStatus
from console.bench.models import BenchmarkRun, RequestSample
from tests.bench.conftest import SMOKE, add_telemetry


def test_a_run_stores_samples_summaries_and_a_snapshot(
    transactional_db: None, endpoint: Any, operator: Any
) -> None:
    run = services.create_run(
        endpoint=endpoint,
        workload=SMOKE,
        user=operator,
        enqueue=False,
        tier_profiles={
            "online": {"weight": 3, "prompt_tokens": 16, "max_tokens": 8},
            "batch": {"weight": 1, "prompt_tokens": 64, "max_tokens": 24},
        },
    )
    assert execution.execute_run(run.pk) == RunStatus.SUCCEEDED
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.progress_percent == 100.0
    assert RequestSample.objects.filter(run=run).count() == 24
    assert run.summary["overall"]["completed"] == 24
    assert set(run.summary) == {"online", "batch", "overall"}
    assert run.summary["overall"]["ttft_s"]["p99"] > 0
    batch_tokens = RequestSample.objects.filter(run=run, tier="batch").values_list(
        "output_tokens", flat=True
    )
    assert batch_tokens and max(batch_tokens) <= 24
    node = run.config_snapshot["nodes"][0]
    assert (
        node["tier_config"]["name"] == "bench"
        and node["launch_profile"]["args"]["max_num_seqs"] == 64
    )
    assert node["gpu"]["models"] == ["Simulated H100"]
    assert run.timeseries and run.validity["wall_s"] > 0
    # A second delivery of the same task does nothing.
    assert execution.execute_run(run.pk) == "skipped"

    add_telemetry(endpoint.node_id, run.started_at, 3)
    client = Client()
    client.force_login(operator)
    page = client.get(f"/benchmarks/{run.pk}/")
    assert page.status_code == 200
    figures = json.loads(page.context["figures"] and json.dumps(page.context["figures"]))
    assert {"cdf", "timeline", "telemetry"} <= set(figures)
    assert b"vendor/plotly.min.js" in page.content and b"cdn" not in page.content.lower()
    assert b'id="chart-cdf"' in page.content
    rows = list(
        csv.reader(
            io.StringIO(
                b"".join(client.get(f"/benchmarks/{run.pk}/export.csv").streaming_content).decode()
            )
        )
    )
    assert rows[0][:3] == ["index", "tier", "stage"] and len(rows) == 25
    exported = client.get(f"/benchmarks/{run.pk}/export.json").json()
    assert exported["summary"]["overall"]["completed"] == 24 and len(exported["samples"]) == 24
    assert "api_key" not in json.dumps(exported["config_snapshot"])
    assert BenchmarkRun.objects.get(pk=run.pk).workload["api_key"] is None
