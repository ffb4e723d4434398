"""The run page shows shed beside errors (issue 57, item 5): per tier, the requests the gateway
refused for overload, from the load generator's summary (loadgen/stats.py), apart from errors;
a run stored before shed was counted shows a dash, not a zero. A sweep's error rate still counts
them: a trial that sheds is not error-free to its constraint."""

from __future__ import annotations

import json
import re
from typing import Any

from django.test import Client

from console.bench.choices import RunStatus
from console.bench.models import BenchmarkRun
from console.bench.sweeps.scoring import trial_metrics
from loadgen import RequestSample, summarize


def _sample(index: int, tier: str, status: int = 200, code: str | None = None) -> RequestSample:
    s = RequestSample(index=index, send_time=100.0 + index * 0.1, tier=tier, status=status)
    if code is None:
        s.ttft, s.e2e, s.output_tokens, s.content_chunks = 0.1, 0.5, 4, 4
    else:
        body = {"error": {"message": "refused", "type": "x", "code": code}}
        s.error, s.e2e = f"HTTP {status}: {json.dumps(body)}", 0.01
    return s


def _rows(page: str) -> dict[str, list[str]]:
    """The summary table's cells per tier, tags stripped."""
    table = page.split('<table class="grid" id="summary">', 1)[1].split("</table>", 1)[0]
    rows = {}
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table.split("<tbody>", 1)[1], re.S):
        cells = [
            re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ]
        rows[cells[0]] = cells
    return rows


def _page(run: BenchmarkRun, viewer: Any) -> str:
    client = Client()
    client.force_login(viewer)
    return client.get(f"/benchmarks/{run.pk}/").content.decode()


def test_the_run_page_shows_shed_per_tier_beside_errors(plain_endpoint: Any, viewer: Any) -> None:
    samples = [
        *(_sample(i, "online") for i in range(6)),
        *(_sample(10 + i, "online", 503, "queue_timeout") for i in range(3)),
        _sample(20, "online", 502, "engine_error"),
        *(_sample(30 + i, "batch") for i in range(3)),
        _sample(40, "batch", 429, "queue_full"),
    ]
    run = BenchmarkRun.objects.create(
        endpoint=plain_endpoint, model="m1", status=RunStatus.WITH_ERRORS,
        workload={"requests": 14}, summary=summarize(samples),
    )  # fmt: skip
    page = _page(run, viewer)
    header = page.split('<table class="grid" id="summary">', 1)[1].split("</thead>", 1)[0]
    assert re.search(r"<th[^>]*>Errors</th><th[^>]*>Shed</th>", header), header
    rows = _rows(page)
    # tier, done, errors (rate), shed (rate)
    assert rows["online"][1:4] == ["6", "1 (10.0%)", "3 (30.0%)"], rows["online"]
    assert rows["batch"][1:4] == ["3", "0 (0.0%)", "1 (25.0%)"], rows["batch"]
    assert rows["overall"][1:4] == ["9", "1 (7.1%)", "4 (28.6%)"], rows["overall"]


def test_a_run_stored_before_shed_was_counted_shows_a_dash(
    plain_endpoint: Any, viewer: Any
) -> None:
    summary = summarize([_sample(0, "online"), _sample(1, "online", 503, "queue_timeout")])
    for figures in summary.values():  # as an older load generator wrote it
        figures.pop("shed")
        figures.pop("shed_rate")
    run = BenchmarkRun.objects.create(
        endpoint=plain_endpoint, model="m1", status=RunStatus.SUCCEEDED,
        workload={"requests": 2}, summary=summary,
    )  # fmt: skip
    rows = _rows(_page(run, viewer))
    assert rows["online"][3] == "—" and rows["overall"][3] == "—", rows


def test_a_sweeps_error_rate_counts_shed_requests_as_unserved() -> None:
    shedding = summarize([_sample(0, "online"), _sample(1, "online", 503, "queue_timeout")])
    assert shedding["overall"]["error_rate"] == 0.0 and shedding["overall"]["shed_rate"] == 0.5
    assert trial_metrics([shedding])["error_rate"] == 0.5
    older = {"overall": {"error_rate": 0.25}}  # a summary without shed: its errors alone
    assert trial_metrics([older])["error_rate"] == 0.25
