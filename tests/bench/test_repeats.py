"""Repeats from the API and the pages: a series of N runs like one, an interleaved pair of
series, their refusals (a node changed between the two runs), series comparisons, cancel."""

from __future__ import annotations

from typing import Any

from django.test import Client

from console.bench.choices import RunStatus
from console.bench.models import BenchmarkRun, RunSeries
from tests.bench.conftest import stored_run

URL = "/api/v1/benchmarks/"


def test_an_operator_repeats_a_run_as_a_series_of_fresh_salted_runs(
    plain_endpoint: Any, operator: Any, viewer: Any, api: Any
) -> None:
    run = stored_run(plain_endpoint, ttft_scale=0.1, n=20, label="base")
    run.workload = {**run.workload, "salt": "run-00000000"}
    run.save(update_fields=["workload"])
    assert api(viewer).post(f"{URL}{run.pk}/repeat/", {"repeats": 2}).status_code == 403
    for bad in (0, 21, "many"):
        answer = api(operator).post(f"{URL}{run.pk}/repeat/", {"repeats": bad}, format="json")
        assert answer.status_code == 400 and "repeats" in answer.json()
    answer = api(operator).post(f"{URL}{run.pk}/repeat/", {"repeats": 3}, format="json")
    assert answer.status_code == 202, answer.content
    body = answer.json()
    assert body["repeats"] == 3 and body["ref"] == f"s{body['id']}" and body["template"] == run.pk
    assert [r["status"] for r in body["runs"]] == [RunStatus.PENDING] * 3
    copies = BenchmarkRun.objects.filter(series_id=body["id"])
    salts = {c.workload["salt"] for c in copies}
    assert len(salts) == 3 and "run-00000000" not in salts
    assert {c.workload["concurrency"] for c in copies} == {8}
    assert api(viewer).get(f"/api/v1/benchmark-series/{body['id']}/").json()["runs"] == body["runs"]

    cancelled = api(operator).post(f"/api/v1/benchmark-series/{body['id']}/cancel/")
    assert cancelled.status_code == 202 and cancelled.json()["cancel_requested"] is True
    assert set(copies.values_list("status", flat=True)) == {RunStatus.CANCELLED}


def test_a_pair_is_interleaved_and_refused_when_one_node_changed_between_its_runs(
    plain_endpoint: Any, operator: Any, api: Any
) -> None:
    a = stored_run(plain_endpoint, ttft_scale=0.1, n=20)
    same = stored_run(plain_endpoint, ttft_scale=0.1, n=20, seed=3)
    changed = stored_run(plain_endpoint, ttft_scale=0.1, n=20, max_num_seqs=32)
    refused = api(operator).post(
        f"{URL}repeat-pair/", {"a": a.pk, "b": changed.pk, "repeats": 2}, format="json"
    )
    assert refused.status_code == 400
    assert "node.launch_profile.max_num_seqs" in refused.json()["b"][0]
    assert RunSeries.objects.count() == 0
    answer = api(operator).post(
        f"{URL}repeat-pair/", {"a": a.pk, "b": same.pk, "repeats": 2}, format="json"
    )
    assert answer.status_code == 202, answer.content
    body = answer.json()
    assert body["a"]["partner"] == body["b"]["id"] and body["b"]["side"] == "B"
    order = BenchmarkRun.objects.filter(series__isnull=False).order_by("pk")
    assert list(order.values_list("series_id", flat=True)) == [body["a"]["id"], body["b"]["id"]] * 2
    assert body["compare"] == f"{URL}compare/?a=s{body['a']['id']}&b=s{body['b']['id']}"
    # Before any of them ran, the comparison says so instead of failing.
    pending = api(operator).get(body["compare"]).json()
    assert pending["tiers"] == {} and "A: no finished run to compare yet" in pending["warnings"]
    client = Client()
    client.force_login(operator)
    page = client.get(
        "/benchmarks/compare/", {"a": f"s{body['a']['id']}", "b": f"s{body['b']['id']}"}
    )
    assert page.status_code == 200 and "no finished run to compare yet" in page.content.decode()


def test_series_compare_over_runs_and_name_what_is_missing(
    plain_endpoint: Any, viewer: Any, operator: Any, api: Any
) -> None:
    side_a = RunSeries.objects.create(repeats=3, label="A")
    side_b = RunSeries.objects.create(repeats=3, label="B", side="B")
    for i in range(3):
        for series, scale in ((side_a, 0.05), (side_b, 0.2)):
            run = stored_run(
                plain_endpoint, ttft_scale=scale, n=200, seed=10 * i + int(scale * 100)
            )
            run.series = series
            run.save(update_fields=["series"])
    body = api(viewer).get(f"{URL}compare/", {"a": side_a.ref, "b": side_b.ref}).json()
    assert body["side_a"]["runs"] and len(body["side_b"]["runs"]) == 3
    assert not body["provisional"]
    metrics = {m["metric"]: m for m in body["tiers"]["overall"]["metrics"]}
    assert metrics["ttft_p50"]["verdict"] == "worse" and metrics["ttft_p50"]["runs_a"] == 3
    assert metrics["ttft_p50"]["method"] == "t interval over runs"
    assert body["tiers"]["overall"]["overall"] in ("worse", "mixed")
    for bad, field in (({"a": "s999", "b": side_b.ref}, "a"), ({"a": "x", "b": "1"}, "a")):
        answer = api(viewer).get(f"{URL}compare/", bad)
        assert answer.status_code == 400 and field in answer.json()

    client = Client()
    client.force_login(operator)
    html = client.get("/benchmarks/compare/", {"a": side_a.ref, "b": side_b.ref}).content.decode()
    decision = html.split('id="decision"')[1]
    assert "(provisional)" not in decision[: decision.index("</section>")]
    assert 'id="conditions"' in html


def test_one_click_repeat_on_the_run_page(plain_endpoint: Any, operator: Any) -> None:
    run = stored_run(plain_endpoint, ttft_scale=0.1, n=20)
    client = Client()
    client.force_login(operator)
    assert 'id="repeat-run"' in client.get(f"/benchmarks/{run.pk}/").content.decode()
    answer = client.post(f"/benchmarks/{run.pk}/repeat/", {"repeats": "2"})
    series = RunSeries.objects.get()
    first = series.runs.order_by("pk").first()
    assert first is not None and answer.status_code == 302
    assert answer["Location"] == f"/benchmarks/{first.pk}/"
    page = client.get(answer["Location"]).content.decode()
    assert f"a={run.pk}&amp;b={series.ref}" in page and 'id="cancel-series"' in page
    assert client.post(f"/benchmarks/series/{series.pk}/cancel/").status_code == 302
    assert set(series.runs.values_list("status", flat=True)) == {RunStatus.CANCELLED}
    assert 'id="cancel-series"' not in client.get(answer["Location"]).content.decode()
    other = stored_run(plain_endpoint, ttft_scale=0.1, n=20, seed=4)
    answer = client.post("/benchmarks/compare/repeat/", {"a": run.pk, "b": other.pk})
    assert answer.status_code == 302 and "/benchmarks/compare/?a=s" in answer["Location"]
    assert RunSeries.objects.count() == 3
