"""The pages: run list with filters and one-click presets, the form (seed 003 import,
errors by field), the live progress fragment, cancel, compare."""

from __future__ import annotations

import json
from typing import Any

from django.test import Client

from console.bench.choices import RunStatus
from console.bench.models import BenchmarkRun
from tests.bench.conftest import stored_run


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_list_offers_one_click_presets_per_endpoint_and_filters(
    plain_endpoint: Any, operator: Any
) -> None:
    done = stored_run(plain_endpoint, ttft_scale=0.1, n=20, label="first")
    stored_run(plain_endpoint, ttft_scale=0.1, n=20, status=RunStatus.FAILED, label="second")
    page = _client(operator).get("/benchmarks/")
    html = page.content.decode()
    assert page.status_code == 200
    for preset in ("smoke", "mixed-tiers", "step-ladder"):
        assert f'data-preset="{preset}" data-endpoint="plain"' in html
    assert "first" in html and "second" in html
    filtered = _client(operator).get("/benchmarks/", {"status": "succeeded"}).content.decode()
    assert f"#{done.pk} first" in filtered and "second" not in filtered


def test_viewers_see_runs_but_no_run_buttons(plain_endpoint: Any, viewer: Any) -> None:
    client = _client(viewer)
    assert "data-preset" not in client.get("/benchmarks/").content.decode()
    assert (
        client.post(
            "/benchmarks/quick/", {"endpoint": plain_endpoint.pk, "preset": "smoke"}
        ).status_code
        == 403
    )
    assert client.get("/benchmarks/new/").status_code == 403
    assert not BenchmarkRun.objects.exists()


def test_one_click_creates_a_pending_run_and_shows_its_progress(
    plain_endpoint: Any, operator: Any
) -> None:
    client = _client(operator)
    response = client.post(
        "/benchmarks/quick/", {"endpoint": plain_endpoint.pk, "preset": "step-ladder"}
    )
    run = BenchmarkRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/benchmarks/{run.pk}/"
    assert run.preset == "step-ladder" and [s["concurrency"] for s in run.workload["stages"]] == [
        32,
        128,
        256,
    ]
    detail = client.get(f"/benchmarks/{run.pk}/").content.decode()
    assert f'data-live-url="/benchmarks/{run.pk}/progress/"' in detail
    fragment = client.get(f"/benchmarks/{run.pk}/progress/").content.decode()
    assert (
        'aria-valuenow="0"' in fragment
        and "data-confirm" in fragment
        and "data-live-done" not in fragment
    )
    client.post(f"/benchmarks/{run.pk}/cancel/")
    assert BenchmarkRun.objects.get(pk=run.pk).status == RunStatus.CANCELLED
    assert "data-live-done" in client.get(f"/benchmarks/{run.pk}/progress/").content.decode()


def test_the_form_imports_seed003_settings(plain_endpoint: Any, operator: Any) -> None:
    settings = {
        "load_test": {
            "concurrency": 32,
            "duration_seconds": 10,
            "request_rate": 0,
            "warmup_seconds": 2,
        },
        "workload": {"prompt_tokens": 100, "max_output_tokens": 50, "stream": True},
    }
    response = _client(operator).post(
        "/benchmarks/new/",
        {
            "endpoint": plain_endpoint.pk,
            "arrival": "poisson",
            "prompt_tokens": 1,
            "max_tokens": 1,
            "shared_prefix_tokens": 0,
            "settings_json": json.dumps(settings),
            "slo_ttft_ms": 800,
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    run = BenchmarkRun.objects.get()
    assert run.preset == "seed003-settings" and run.workload["concurrency"] == 32
    assert run.workload["prompt_tokens"] == 100 and run.workload["slo_ttft_ms"] == 800


def test_form_errors_name_the_field(plain_endpoint: Any, operator: Any) -> None:
    client = _client(operator)
    base = {
        "endpoint": plain_endpoint.pk,
        "arrival": "poisson",
        "prompt_tokens": 10,
        "max_tokens": 10,
        "shared_prefix_tokens": 0,
        "concurrency": 2,
        "requests": 5,
    }
    bad_prefix = client.post("/benchmarks/new/", {**base, "shared_prefix_tokens": 50})
    assert bad_prefix.status_code == 200
    assert "shared_prefix_tokens" in bad_prefix.context["form"].errors
    bad_stages = client.post("/benchmarks/new/", {**base, "stages": "32-10"})
    assert "stages" in bad_stages.context["form"].errors
    bad_json = client.post("/benchmarks/new/", {**base, "settings_json": "{nope"})
    assert "settings_json" in bad_json.context["form"].errors
    ok = client.post(
        "/benchmarks/new/", {**base, "tier_mix": "online=0.5,batch=0.5", "label": "by hand"}
    )
    assert ok.status_code == 302
    assert BenchmarkRun.objects.get().workload["tier_mix"] == {"online": 0.5, "batch": 0.5}


def test_the_compare_page_shows_charts_verdicts_and_the_diff(
    plain_endpoint: Any, viewer: Any
) -> None:
    a = stored_run(plain_endpoint, ttft_scale=0.05, n=200, seed=1)
    b = stored_run(plain_endpoint, ttft_scale=0.3, n=200, seed=2, max_num_seqs=128)
    page = _client(viewer).get("/benchmarks/compare/", {"a": a.pk, "b": b.pk})
    html = page.content.decode()
    assert page.status_code == 200
    assert set(page.context["figures"]) >= {"bars", "cdf"}
    assert 'id="chart-bars"' in html and 'class="badge worse"' in html
    assert "node.launch_profile.max_num_seqs" in html
    assert _client(viewer).get("/benchmarks/compare/").status_code == 200


def test_the_run_page_draws_many_samples_in_a_bounded_number_of_points(
    plain_endpoint: Any, viewer: Any
) -> None:
    # Ten times more samples than a trace holds: the page draws each tier's distribution in at
    # most 500 points, not one per sample (per-sample traces took 30 s and more to draw). How
    # long the page takes is a benchmark's question, not this test's.
    run = stored_run(plain_endpoint, ttft_scale=0.1, n=5_000)
    page = _client(viewer).get(f"/benchmarks/{run.pk}/")
    assert page.status_code == 200
    cdf = page.context["figures"]["cdf"]
    assert cdf["data"] and all(len(trace["x"]) <= 500 for trace in cdf["data"])
