"""The REST API: create (operator), list with filters, get, cancel, samples, compare; 400s
name the field; the OpenAPI schema still builds without warnings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management import call_command

from console.bench.choices import RunStatus
from console.bench.models import BenchmarkRun
from tests.bench.conftest import stored_run

URL = "/api/v1/benchmarks/"


def test_it_rejects_anonymous_and_viewers_writing(
    plain_endpoint: Any, viewer: Any, api: Any
) -> None:
    assert api(None).get(URL).status_code == 401
    assert api(viewer).get(URL).status_code == 200
    assert (
        api(viewer)
        .post(URL, {"endpoint": plain_endpoint.pk, "preset": "smoke"}, format="json")
        .status_code
        == 403
    )
    run = stored_run(plain_endpoint, ttft_scale=0.1, n=20, status=RunStatus.RUNNING)
    assert api(viewer).post(f"{URL}{run.pk}/cancel/").status_code == 403
    assert BenchmarkRun.objects.get(pk=run.pk).cancel_requested is False


def test_an_operator_creates_a_run_from_a_preset(
    plain_endpoint: Any, operator: Any, api: Any
) -> None:
    response = api(operator).post(
        URL, {"endpoint": plain_endpoint.pk, "preset": "mixed-tiers", "label": "mix"}, format="json"
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "pending" and body["model"] == "m1" and body["preset"] == "mixed-tiers"
    assert body["workload"]["tier_mix"] == {"online": 0.7, "batch": 0.2, "offline": 0.1}
    assert body["tier_profiles"]["offline"]["max_tokens"] == 256
    assert body["workload"]["api_key"] is None and "sk-test" not in response.content.decode()
    assert body["slo"] == {"ttft_ms": 1200.0, "tpot_ms": None}
    assert body["progress"] == {
        "percent": 0.0,
        "elapsed_s": 0.0,
        "requests_done": 0,
        "errors": 0,
        "current_p99_ttft_s": None,
    }
    assert BenchmarkRun.objects.get(pk=body["id"]).created_by == operator


def test_seed003_settings_import_as_the_workload(
    plain_endpoint: Any, operator: Any, api: Any
) -> None:
    settings = {
        "api": {
            "base_url": "https://example.invalid/api",
            "api_key_env": "K",
            "timeout_seconds": 120,
        },
        "load_test": {
            "concurrency": 128,
            "duration_seconds": 300,
            "request_rate": 0,
            "warmup_seconds": 30,
        },
        "workload": {
            "prompt_tokens": 512,
            "max_output_tokens": 256,
            "stream": True,
            "temperature": 0.7,
        },
    }
    response = api(operator).post(
        URL, {"endpoint": plain_endpoint.pk, "seed003_settings": settings}, format="json"
    )
    assert response.status_code == 201, response.content
    w = response.json()["workload"]
    assert (
        w["concurrency"],
        w["duration_s"],
        w["warmup_s"],
        w["prompt_tokens"],
        w["max_tokens"],
    ) == (128, 300, 30, 512, 256)
    assert (
        w["base_url"] == plain_endpoint.base_url and response.json()["preset"] == "seed003-settings"
    )


def test_bad_input_gets_a_400_naming_the_field(
    plain_endpoint: Any, operator: Any, api: Any
) -> None:
    client = api(operator)
    cases = [
        ({"preset": "smoke"}, "endpoint"),
        (
            {"endpoint": plain_endpoint.pk, "workload": {"concurrency": 0, "requests": 5}},
            "workload.concurrency",
        ),
        (
            {
                "endpoint": plain_endpoint.pk,
                "workload": {"concurrency": 2, "requests": 5, "bogus": 1},
            },
            "workload.bogus",
        ),
        ({"endpoint": plain_endpoint.pk, "workload": {"concurrency": 2}}, "workload.requests"),
        ({"endpoint": plain_endpoint.pk}, "workload"),
        (
            {
                "endpoint": plain_endpoint.pk,
                "workload": {"concurrency": 1, "requests": 1, "prompts_file": "/etc/passwd"},
            },
            "workload.prompts_file",
        ),
        (
            {
                "endpoint": plain_endpoint.pk,
                "preset": "smoke",
                "tier_profiles": {"online": {"weight": -1, "prompt_tokens": 1, "max_tokens": 1}},
            },
            "tier_profiles.online.weight",
        ),
        (
            {
                "endpoint": plain_endpoint.pk,
                "seed003_settings": {"load_test": {"duration_seconds": -5}},
            },
            "seed003_settings",
        ),
        ({"endpoint": plain_endpoint.pk, "preset": "nope"}, "preset"),
        # Wrong types anywhere in the JSON: a 400 naming the field, never a 500.
        (
            {"endpoint": plain_endpoint.pk, "workload": {"stages": [{"concurrency": 2}]}},
            "workload.stages[0].duration_s",
        ),
        (
            {
                "endpoint": plain_endpoint.pk,
                "workload": {"concurrency": 2, "requests": 5, "tier_mix": [1]},
            },
            "workload.tier_mix",
        ),
        (
            {"endpoint": plain_endpoint.pk, "workload": {"concurrency": "abc", "requests": 5}},
            "workload.concurrency",
        ),
        (
            {
                "endpoint": plain_endpoint.pk,
                "seed003_settings": {"workload": {"prompt_tokens": "many"}},
            },
            "seed003_settings",
        ),
        (
            {"endpoint": plain_endpoint.pk, "seed003_settings": {"load_test": "x"}},
            "seed003_settings",
        ),
    ]
    for payload, field in cases:
        response = client.post(URL, payload, format="json")
        assert response.status_code == 400, (payload, response.content)
        assert field in response.json(), (field, response.json())
    assert not BenchmarkRun.objects.exists()


def test_the_list_filters_and_rejects_unknown_filter_values(
    plain_endpoint: Any, viewer: Any, api: Any
) -> None:
    done = stored_run(plain_endpoint, ttft_scale=0.1, n=20)
    stored_run(plain_endpoint, ttft_scale=0.1, n=20, status=RunStatus.FAILED)
    client = api(viewer)
    assert [r["id"] for r in client.get(URL, {"status": "succeeded"}).json()["results"]] == [
        done.pk
    ]
    assert client.get(URL, {"endpoint": plain_endpoint.pk}).json()["count"] == 2
    assert client.get(URL, {"preset": "smoke"}).json()["count"] == 0
    assert "status" in client.get(URL, {"status": "bogus"}).json()
    body = client.get(f"{URL}{done.pk}/").json()
    assert body["summary"]["overall"]["completed"] == 20 and body["endpoint_name"] == "plain"


def test_cancelling_a_pending_run_cancels_it_at_once(
    plain_endpoint: Any, operator: Any, api: Any
) -> None:
    pk = (
        api(operator)
        .post(URL, {"endpoint": plain_endpoint.pk, "preset": "smoke"}, format="json")
        .json()["id"]
    )
    response = api(operator).post(f"{URL}{pk}/cancel/")
    assert response.status_code == 202 and response.json()["status"] == "cancelled"
    assert api(operator).post(f"{URL}{pk}/cancel/").status_code == 409


def test_samples_are_paginated(plain_endpoint: Any, viewer: Any, api: Any) -> None:
    run = stored_run(plain_endpoint, ttft_scale=0.1, n=30)
    page = api(viewer).get(f"{URL}{run.pk}/samples/", {"page_size": 25}).json()
    assert page["count"] == 30 and len(page["results"]) == 25 and page["next"]
    assert [s["index"] for s in page["results"][:3]] == [0, 1, 2]
    assert set(page["results"][0]) >= {"ttft", "tpot", "e2e", "tier", "output_tokens", "error"}


def test_compare_returns_per_tier_verdicts_and_the_config_diff(
    plain_endpoint: Any, viewer: Any, api: Any
) -> None:
    a = stored_run(plain_endpoint, ttft_scale=0.05, n=400, seed=1)
    b = stored_run(plain_endpoint, ttft_scale=0.2, n=400, seed=2, max_num_seqs=128)
    same = stored_run(plain_endpoint, ttft_scale=0.05, n=400, seed=1)
    body = api(viewer).get(f"{URL}compare/", {"a": a.pk, "b": b.pk}).json()
    assert (body["a"], body["b"]) == (a.pk, b.pk)
    assert set(body["tiers"]) == {"online", "batch", "overall"}
    metrics = {m["metric"]: m for m in body["tiers"]["overall"]["metrics"]}
    assert metrics["ttft_p50"]["verdict"] == "worse" and metrics["ttft_p99"]["verdict"] == "worse"
    assert metrics["ttft_p50"]["delta"] > 0 and metrics["tpot_p50"]["verdict"] == "no clear change"
    paths = {row["path"]: row for row in body["config_diff"]}
    assert paths["node.launch_profile.max_num_seqs"]["new"] == 128
    assert paths["node.engine.args.max_num_seqs"]["old"] == 64
    # Reversed, the same change reads as better; identical runs show no clear change.
    back = api(viewer).get(f"{URL}compare/", {"a": b.pk, "b": a.pk}).json()
    assert {m["metric"]: m["verdict"] for m in back["tiers"]["overall"]["metrics"]}[
        "ttft_p50"
    ] == "better"
    flat = api(viewer).get(f"{URL}compare/", {"a": a.pk, "b": same.pk}).json()
    latency = [m for m in flat["tiers"]["overall"]["metrics"] if not m["higher_is_better"]]
    assert {m["verdict"] for m in latency} == {"no clear change"}
    # One run a side: no interval for throughput, and every verdict is provisional.
    throughput = [m for m in flat["tiers"]["overall"]["metrics"] if m["higher_is_better"]]
    assert {m["verdict"] for m in throughput} == {"not enough data"}
    assert flat["provisional"] and all(m["provisional"] for m in latency)
    # One run a side cannot show that nothing changed: the decision asks for more runs.
    assert flat["tiers"]["overall"]["overall"] == "not enough data"
    assert "more runs a side would decide" in flat["decision"]["headline"]
    assert any("same configuration and workload" in w for w in flat["warnings"])
    assert any("Provisional" in w for w in flat["warnings"])
    assert "b" in api(viewer).get(f"{URL}compare/", {"a": a.pk}).json()
    assert "b" in api(viewer).get(f"{URL}compare/", {"a": a.pk, "b": 99999}).json()


def test_the_openapi_schema_builds_without_warnings(db: None, tmp_path: Path) -> None:
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    text = out.read_text()
    assert "/api/v1/benchmarks/{id}/cancel/" in text and "/api/v1/benchmarks/compare/" in text
