"""In Chromium: one click on a preset, progress to 100%, charts drawn; then compare two runs."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _run_preset(page: Any, endpoint_name: str) -> int:
    page.goto("/benchmarks/")
    page.click(f'button[data-preset="smoke"][data-endpoint="{endpoint_name}"]')
    page.wait_for_url(re.compile(r"/benchmarks/\d+/$"))
    run_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
    page.wait_for_selector('#run-progress [role=progressbar][aria-valuenow="100"]', timeout=40_000)
    assert "100%" in page.inner_text("#progress-text")
    # The finished page draws the charts with the locally served plotly.js.
    page.wait_for_selector("#chart-cdf.js-plotly-plot", timeout=15_000)
    page.wait_for_selector("#chart-timeline.js-plotly-plot")
    return run_id


def test_one_click_runs_a_benchmark_and_two_runs_compare(
    transactional_db: None,
    celery_worker_proc: Any,
    endpoint: Any,
    operator: Any,
    browser_page: Any,
) -> None:
    page = browser_page
    sign_in(page, "otto")
    first = _run_preset(page, endpoint.name)
    assert page.locator("#summary tbody tr").count() >= 2  # the tier and overall
    second = _run_preset(page, endpoint.name)

    page.goto("/benchmarks/")
    page.check(f'#runs input[name=a][value="{first}"]')
    page.check(f'#runs input[name=b][value="{second}"]')
    page.click("#compare-form button")
    page.wait_for_url(re.compile(r"/benchmarks/compare/\?"))
    assert f"a={first}" in page.url and f"b={second}" in page.url
    page.wait_for_selector("#chart-bars.js-plotly-plot")
    page.wait_for_selector("#chart-cdf.js-plotly-plot")
    verdicts = page.inner_text("#verdicts")
    assert "ttft_p99" in verdicts
    assert any(v in verdicts for v in ("better", "worse", "no clear change"))
