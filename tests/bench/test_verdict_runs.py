"""Verdicts an operator can act on, with real runs against simulators: A/A shows no clear
change (the prefix cache reset and the prompts salted), a real effect (half the engine's
max_num_seqs) shows as worse, in the page and the API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from console.bench import execution, repeats, services
from console.bench.choices import RunStatus
from console.bench.presets import preset_workload
from gpu_agent.sim.testing import run_sim_process
from tests.bench.conftest import Gateway
from tests.conftest import api_client_for

pytestmark = pytest.mark.slow


def _run(endpoint: Any, user: Any, workload: dict[str, Any], preset: str = "custom") -> Any:
    run = services.create_run(
        endpoint=endpoint, workload=workload, user=user, enqueue=False, preset=preset
    )
    assert execution.execute_run(run.pk) == RunStatus.SUCCEEDED
    run.refresh_from_db()
    return run


def _clear(body: dict[str, Any]) -> list[tuple[str, str, str, Any]]:
    return [
        (tier, m["metric"], m["verdict"], m)
        for tier, data in body["tiers"].items()
        for m in data["metrics"]
        if m["verdict"] in ("better", "worse")
    ]


def _compare(user: Any, a: str, b: str) -> tuple[dict[str, Any], str]:
    body = api_client_for(user).get("/api/v1/benchmarks/compare/", {"a": a, "b": b}).json()
    client = Client()
    client.force_login(user)
    page = client.get("/benchmarks/compare/", {"a": a, "b": b})
    assert page.status_code == 200
    return body, page.content.decode()


def test_two_runs_of_one_preset_on_a_caching_simulator_show_no_clear_change(
    transactional_db: None, gpu_like_gateway: Gateway, operator: Any
) -> None:
    from console.fleet import services as fleet_services
    from console.fleet.choices import EndpointKind

    endpoint = fleet_services.create_endpoint(
        None,
        name="aa-gw",
        base_url=gpu_like_gateway.url + "/v1",
        api_key=gpu_like_gateway.key,
        kind=EndpointKind.GATEWAY,
        default_model=gpu_like_gateway.model,
    )
    workload, _ = preset_workload("smoke", endpoint.base_url, "")
    workload = {k: v for k, v in workload.items() if k not in ("base_url", "model")}
    first = _run(endpoint, operator, workload, preset="smoke")
    second = _run(endpoint, operator, workload, preset="smoke")
    for run in (first, second):
        conditions = run.conditions
        assert conditions["prefix_cache_reset"] == "done"
        assert conditions["salt"].startswith("run-")
        # The second run does not find the first one's prompts in the cache.
        assert conditions["engine"]["prefix_queries"] > 0
        assert conditions["engine"]["prefix_hit_rate"] < 0.05
        assert conditions["client_load"]["cpus"] >= 1 and conditions["target_load"]["cpus"] >= 1
        assert conditions["engine"]["preemptions"] == 0
    assert first.workload["salt"] != second.workload["salt"]

    body, html = _compare(operator, str(first.pk), str(second.pk))
    assert _clear(body) == [], ("one run a side", _clear(body))
    # One run a side cannot show that nothing changed: no tier is decided better or worse.
    assert body["provisional"] and {d["overall"] for d in body["tiers"].values()} <= {
        "no clear change",
        "not enough data",
    }
    assert "same configuration and workload" in " ".join(body["warnings"])
    assert html.count('class="badge better"') == html.count('class="badge worse"') == 0
    assert "(provisional)" in html and 'id="repeat-pair"' in html

    series_a, series_b = repeats.create_pair(first, second, 2, operator, enqueue=False)
    order = list(
        series_a.runs.model.objects.filter(series__in=[series_a, series_b])
        .order_by("pk")
        .values_list("series_id", flat=True)
    )
    assert order == [series_a.pk, series_b.pk] * 2  # interleaved A B A B
    assert execution.execute_series([series_a.pk, series_b.pk]) == [RunStatus.SUCCEEDED] * 4
    body, html = _compare(operator, series_a.ref, series_b.ref)
    assert _clear(body) == [], ("two runs a side", _clear(body))
    assert not body["provisional"] and body["side_a"]["runs"] and len(body["side_b"]["runs"]) == 2
    latency = body["tiers"]["overall"]["metrics"][0]
    assert latency["method"] == "t interval over runs" and latency["runs_a"] == 2
    assert {d["overall"] for d in body["tiers"].values()} <= {"no clear change", "not enough data"}
    assert 'class="badge worse"' not in html and 'class="badge better"' not in html


@pytest.fixture(scope="module")
def two_engines() -> Iterator[tuple[str, str]]:
    """Two simulators of an 8B model on an H100 (steps of several ms, so a queue shows),
    the second with half the first's max_num_seqs."""
    with (
        run_sim_process("ab-model", ("--max-num-seqs", "8"), preset=None) as full,
        run_sim_process("ab-model", ("--max-num-seqs", "4"), preset=None) as half,
    ):
        yield full, half


def test_half_the_max_num_seqs_shows_as_worse_over_interleaved_repeats(
    transactional_db: None, two_engines: tuple[str, str], operator: Any
) -> None:
    from console.fleet import services as fleet_services
    from console.fleet.choices import EndpointKind

    endpoints = [
        fleet_services.create_endpoint(
            None, name=name, base_url=url + "/v1", kind=EndpointKind.VLLM, default_model="ab-model"
        )
        for name, url in zip(("full", "half"), two_engines, strict=True)
    ]
    workload = {"concurrency": 8, "requests": 48, "prompt_tokens": 64, "max_tokens": 32}
    a, b = (_run(e, operator, workload) for e in endpoints)
    assert a.conditions["prefix_cache_reset"] == "done"  # the engine's own route
    assert a.conditions["engine"]["preemptions"] is not None

    series_a, series_b = repeats.create_pair(a, b, 3, operator, enqueue=False)
    execution.execute_series([series_a.pk, series_b.pk])
    body, html = _compare(operator, series_a.ref, series_b.ref)
    verdicts = {m["metric"]: m for m in body["tiers"]["overall"]["metrics"]}
    # Half the slots: requests queue for one, so the time to first token and end to end grow.
    for metric in ("ttft_p50", "e2e_p50"):
        assert verdicts[metric]["verdict"] == "worse", verdicts[metric]
        assert verdicts[metric]["method"] == "t interval over runs"
    # Tails and throughput move the same way; with 3 runs a side one stalled run on a loaded
    # machine can widen their intervals past a verdict, so only their direction is checked.
    assert verdicts["ttft_p99"]["delta"] > 0 and verdicts["request_throughput_rps"]["delta"] < 0
    assert verdicts["ttft_p99"]["verdict"] != "better"
    # Smaller batches may make each token a little faster (TPOT better), which a vote of the
    # metrics read as "mixed"; the decision reads its objective and guardrails: worse.
    assert body["decision"]["outcome"] == "worse", body["decision"]["text"]
    assert body["tiers"]["overall"]["overall"] == "worse"
    assert "endpoint" in {row["path"] for row in body["config_diff"]}
    assert 'class="badge worse"' in html
