"""In Chromium: a running benchmark's page fills in its start time and the configuration
snapshot without a reload; an admin edits a node's labels on its page."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from console.bench.choices import RunStatus
from console.bench.models import BenchmarkRun
from tests.conftest import sign_in

pytestmark = pytest.mark.browser


def test_the_run_page_follows_a_run_that_starts(
    transactional_db: None, viewer: Any, plain_endpoint: Any, browser_page: Any
) -> None:
    run = BenchmarkRun.objects.create(
        endpoint=plain_endpoint, model="m1", status=RunStatus.PENDING, workload={"requests": 5}
    )
    page = browser_page
    sign_in(page, "vera")
    page.goto(f"/benchmarks/{run.pk}/")
    page.evaluate("window.__notReloaded = true")
    assert "gpu-live-9" not in page.inner_text("#run-info")
    BenchmarkRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING,
        started_at=timezone.now(),
        config_snapshot={
            "nodes": [{"name": "gpu-live-9", "engine": {"args": {"max_num_seqs": 7}}}]
        },
        current_p99_ttft_s=0.25,
    )
    page.wait_for_function("document.querySelector('#run-info').innerText.includes('gpu-live-9')")
    assert '"max_num_seqs": 7' in page.inner_text("#run-info")
    page.wait_for_function(
        "document.querySelector('#run-progress').innerText.includes('TTFT P99 250 ms')"
    )
    assert page.evaluate("window.__notReloaded") is True


def test_an_admin_edits_node_labels_on_the_page(
    transactional_db: None, admin_user: Any, browser_page: Any
) -> None:
    from console.fleet import services
    from console.fleet.models import Node

    node, _token = services.create_node("gpu-labels-1", ["old"], None)
    page = browser_page
    sign_in(page, "ada")
    page.goto(f"/fleet/nodes/{node.pk}/")
    page.fill("#node-labels input[name=labels]", "h200, zone-b")
    page.click("#node-labels button")
    page.wait_for_selector("text=Labels of gpu-labels-1 saved.")
    assert Node.objects.get(pk=node.pk).labels == ["h200", "zone-b"]
    assert "h200, zone-b" in page.inner_text("#node-status")
