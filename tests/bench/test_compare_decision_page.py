"""The compare page leads with the decision (issue 56): the regression that every tier's
"mixed" once hid reads "worse" at the top, with the figures behind it; validity flags are one
line per side with the detail behind a toggle, and a flag that moves no figure the decision
reads raises no alarm. Labels a new operator tripped over (issue 58) say what they are."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from console.bench import repeats
from console.bench.models import BenchmarkRun, RunSeries
from tests.bench.decision_data import BEFORE, new_run, regression_series
from tests.conftest import sign_in

URL = "/benchmarks/compare/"
ITL_MERGED = {
    "flags": ["itl_merged_share=0.012 exceeds 0.01"],
    "untrusted": {"itl_s": "1.2% of ITL gaps are between chunks that reached the client ..."},
    "itl_merged_share": 0.012,
}


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_regression_reads_worse_first_with_the_figures_behind_it(
    plain_endpoint: Any, operator: Any
) -> None:
    side_a, side_b = regression_series(plain_endpoint)
    # One flagged run a side, for a figure the decision does not read (ITL).
    for series in (side_a, side_b):
        run = series.runs.order_by("pk").first()
        BenchmarkRun.objects.filter(pk=run.pk).update(validity=ITL_MERGED)
    html = _client(operator).get(URL, {"a": side_a.ref, "b": side_b.ref}).content.decode()
    top = html[html.index('id="decision"') :]
    headline = re.search(r'data-outcome="([^"]+)">([^<]+)<', top)
    assert headline is not None and headline.group(1) == "worse", top[:600]
    reason = re.search(r'id="decision-reason">([^<]+)<', top)
    assert reason is not None and reason.group(1).startswith("guardrail breached: ")
    assert "request throughput -3" in reason.group(1) and "offline TTFT P99 +" in reason.group(1)
    # The decision comes before every metric's verdicts and the charts.
    assert html.index('id="decision"') < html.index('id="verdicts"') < html.index("chart-cdf")
    figures = top[: top.index("</table>")]
    assert figures.count("<td>objective</td>") == 1 and "online TTFT P99" in figures
    assert figures.count('<span class="badge worse">breached</span>') == 2
    # The ITL flag: in the detail behind a toggle, no red line, no warning above the decision.
    details = re.findall(r'<details class="validity" data-side="(\w)"><summary([^>]*)>', html)
    assert details == [("A", ""), ("B", "")]
    assert "none moves a figure the decision reads" in html
    assert "itl_merged_share=0.012" in html.split('id="compare-validity"')[1]
    assert 'class="error">A:' not in html and "carries validity flags" not in top[:2000]


def test_a_flag_that_moves_a_decision_figure_says_which_and_by_how_much(
    plain_endpoint: Any, viewer: Any, api: Any
) -> None:
    a = new_run(plain_endpoint, **BEFORE, seed=1)
    b = new_run(plain_endpoint, **BEFORE, seed=2)
    lagged = {
        "flags": ["loop_lag_max_s=0.02 exceeds 0.1"],
        "untrusted": {"ttft_s": "chunk times are the client's reads and its loop lagged"},
        "receive_times": "read",
        "loop_lag_max_s": 0.02,
        "ttft_merged_share": 0.0,
        "bounds": {"ttft_merged_share": 0.01},
    }
    BenchmarkRun.objects.filter(pk=b.pk).update(validity=lagged)
    body = api(viewer).get("/api/v1/benchmarks/compare/", {"a": a.pk, "b": b.pk}).json()
    line = body["validity"]["B"]["line"]
    p99 = b.summary["online"]["ttft_s"]["p99"]
    shift = f"{0.02 / p99:.1%}"
    assert line.startswith("B: validity flags move a figure the decision reads: online TTFT")
    assert f"by up to {shift} in run #{b.pk}" in line and "20 ms" in line, line
    assert body["validity"]["B"]["affects"] and line in body["warnings"]
    assert body["validity"]["A"] == {"line": "", "details": [], "affects": False, "summary": ""}


def test_labels_say_what_a_repeat_a_side_and_a_configuration_are(
    plain_endpoint: Any, operator: Any
) -> None:
    a = new_run(plain_endpoint, max_in_flight=24, **BEFORE, seed=1)
    b = new_run(plain_endpoint, max_in_flight=12, **BEFORE, seed=2)
    b.endpoint = type(plain_endpoint).objects.create(
        name="other", base_url="http://127.0.0.1:9/v1", default_model="m1"
    )
    b.save(update_fields=["endpoint"])
    series_a, series_b = repeats.create_pair(a, b, 3, operator, enqueue=False)
    labels = list(series_b.runs.order_by("pk").values_list("label", flat=True))
    assert labels == [
        f"side B run {i}/3: like #{b.pk} (pair #{a.pk} vs #{b.pk})" for i in (1, 2, 3)
    ]
    plain = repeats.create_series(a, 2, operator, enqueue=False)
    assert list(plain.runs.values_list("label", flat=True).order_by("pk")) == [
        f"run 1/2: like #{a.pk}",
        f"run 2/2: like #{a.pk}",
    ]
    client = _client(operator)
    # A side none of whose 3 runs has finished: said so, with no "one run" and no "()".
    html = client.get(URL, {"a": series_a.ref, "b": series_b.ref}).content.decode()
    assert f"A: series {series_a.pk}: 0 of 3 runs finished ·" in html
    assert "()" not in html.split('id="sides"')[1][:300]
    assert "a side has one run" not in html and "A: no finished run to compare yet" in html
    # The list shows which configuration each run measured: v1 and v2 no longer look alike.
    listing = client.get("/benchmarks/").content.decode()
    assert f">#{a.pk} " in listing and "tiers v1 · engine v1" in listing
    assert "tiers v2 · engine v1" in listing
    first = series_b.runs.order_by("pk").first()
    assert first is not None and f"#{first.pk} side B run 1/3: like #{b.pk}" in listing


@pytest.mark.browser
def test_in_chromium_the_regression_reads_worse_at_the_top(
    transactional_db: None, plain_endpoint: Any, operator: Any, browser_page: Any
) -> None:
    side_a, side_b = regression_series(plain_endpoint)
    page = browser_page
    sign_in(page, "otto")
    page.goto(f"{URL}?a={side_a.ref}&b={side_b.ref}", timeout=90_000)
    badge = page.locator("#decision-headline .badge")
    assert badge.inner_text() == "worse"
    assert badge.get_attribute("data-outcome") == "worse"
    # The first thing under the pickers: nothing but the form stands above it.
    top = page.locator("#decision").bounding_box()
    assert top is not None and top["y"] < page.locator("#verdicts").bounding_box()["y"]
    assert top["y"] < 500, top
    assert "guardrail breached" in page.inner_text("#decision-reason")
    assert page.locator("#tier-decisions tr[data-tier=offline] .badge").inner_text() == "worse"
    # No validity alarm above the decision, and no verdict table to read before it.
    assert page.locator("details.validity summary.error").count() == 0
    assert RunSeries.objects.count() == 2


def test_requests_the_gateway_sheds_breach_the_shed_guardrail(
    plain_endpoint: Any, viewer: Any, api: Any
) -> None:
    a = [new_run(plain_endpoint, **BEFORE, seed=i) for i in range(3)]
    b = [new_run(plain_endpoint, **BEFORE, seed=10 + i, shed_share=0.08) for i in range(3)]
    side_a, side_b = (RunSeries.objects.create(repeats=3) for _ in "ab")
    BenchmarkRun.objects.filter(pk__in=[r.pk for r in a]).update(series=side_a)
    BenchmarkRun.objects.filter(pk__in=[r.pk for r in b]).update(series=side_b)
    body = api(viewer).get("/api/v1/benchmarks/compare/", {"a": side_a.ref, "b": side_b.ref}).json()
    decision = body["decision"]
    assert decision["outcome"] == "worse" and "shed rate" in decision["breaches"]
    assert body["tiers"]["online"]["decision"]["outcome"] == "worse"
