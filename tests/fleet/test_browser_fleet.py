"""In Debian's Chromium: the fleet table refreshes from heartbeats without a reload, and the
node page draws its Plotly chart with the locally served plotly.js."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from django.test import Client

from console.fleet import services
from tests.conftest import sign_in
from tests.fleet.fleet_helpers import beat, post_beat, sample

pytestmark = pytest.mark.browser


def test_live_fleet_table_and_node_chart(
    transactional_db: None, viewer: Any, browser_page: Any
) -> None:
    page = browser_page
    node, token = services.create_node("gpu-live-01", ["h200"], None)
    now = time.time()
    post_beat(
        Client(), token, beat(samples=[sample(now - 2 + i, online={"depth": 1}) for i in range(2)])
    )
    sign_in(page, "vera")
    page.goto("/fleet/")
    row = page.locator("tr[data-node='gpu-live-01']")
    assert "online 1" in row.inner_text()
    page.evaluate("window.__notReloaded = true")
    post_beat(Client(), token, beat(samples=[sample(time.time(), online={"depth": 42})]))
    page.wait_for_function(
        "document.querySelector(\"tr[data-node='gpu-live-01']\").innerText.includes('online 42')"
    )
    assert page.evaluate("window.__notReloaded") is True  # updated in place, no reload
    if os.environ.get("TIERGATE_SCREENSHOTS"):
        page.screenshot(
            path=os.path.join(os.environ["TIERGATE_SCREENSHOTS"], "fleet.png"), full_page=True
        )

    page.goto(f"/fleet/nodes/{node.pk}/")
    page.wait_for_selector("#node-chart .main-svg")
    assert page.locator("#node-chart .scatterlayer .trace").count() >= 4
    # The status card follows the node without a reload: a new agent version shows up.
    page.evaluate("window.__notReloaded = true")
    post_beat(Client(), token, beat(samples=[sample(time.time())], agent_version="9.9.9-live"))
    page.wait_for_function(
        "document.querySelector('#node-status').innerText.includes('9.9.9-live')"
    )
    assert page.evaluate("window.__notReloaded") is True
    if os.environ.get("TIERGATE_SCREENSHOTS"):
        page.screenshot(
            path=os.path.join(os.environ["TIERGATE_SCREENSHOTS"], "node-detail.png"), full_page=True
        )


def test_an_idle_nodes_chart_fits_its_card_and_starts_at_zero(
    transactional_db: None, viewer: Any, browser_page: Any
) -> None:
    page = browser_page
    node, token = services.create_node("gpu-idle-01", [], None)
    tiers = {name: {"depth": 0} for name in ("online", "batch", "offline")}
    now = time.time()
    post_beat(Client(), token, beat(samples=[sample(now - 5 + i, **tiers) for i in range(5)]))
    sign_in(page, "vera")
    page.goto(f"/fleet/nodes/{node.pk}/")
    page.wait_for_selector("#node-chart .main-svg")
    card = page.locator("#node-chart").bounding_box()
    legend = page.locator("#node-chart .legend").bounding_box()
    assert card is not None and legend is not None
    assert legend["y"] >= card["y"] and legend["y"] + legend["height"] <= card["y"] + card["height"]
    # The queue-depth panel's axis (the third) runs from 0, not from -1.
    low = page.evaluate("document.getElementById('node-chart')._fullLayout.yaxis3.range[0]")
    assert low == 0
