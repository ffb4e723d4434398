"""In the browser: Roll out, watch the nodes converge without reloading, Roll back, confirm,
and watch them return."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import sign_in
from tests.rollouts.rollout_helpers import InlineWorker
from tests.waiting import wait_for


@pytest.fixture
def inline_worker(transactional_db: None) -> Iterator[InlineWorker]:
    worker = InlineWorker()
    worker.start()
    yield worker
    worker.stop()


def test_roll_out_watch_converge_roll_back_confirm_watch_return(
    fleet: Any,
    versions: Any,
    operator: Any,
    browser_page: Any,
    inline_worker: InlineWorker,
) -> None:
    from django.db import connections

    from console.fleet.models import Node

    # Under Playwright's sync API this body's ORM calls get a connection of their own (not the
    # test's); close it, or PostgreSQL refuses to drop the test database at the end.
    try:
        v1, v2 = versions
        nodes = fleet(2)
        page = browser_page
        sign_in(page, operator.username)
        page.goto("/tuning/rollouts/new/")
        assert page.input_value("select[name=tier_config]") == str(v2.pk)  # preselected
        page.fill("input[name=convergence_timeout_s]", "20")
        page.fill("input[name=canary_soak_s]", "0")  # the defaults are for operators, not tests
        page.fill("input[name=guard_max_ttft_p99_regression_pct]", "")
        page.fill("input[name=guard_max_error_rate]", "")
        page.click("#roll-out")
        page.wait_for_url("**/tuning/rollouts/*/")
        url = page.url
        marker = page.evaluate("() => (window.tgMarker = 'same page')")  # gone if the page reloads
        page.wait_for_selector('#rollout-status[data-state="succeeded"]', timeout=30000)
        assert page.evaluate("() => window.tgMarker") == marker and page.url == url
        assert page.locator('#rollout-nodes tr[data-state="healthy"]').count() == 2
        assert "wave 2 applied and healthy" in page.inner_text("#rollout-events")
        for _, agent in nodes:
            assert agent.applied() == v2.pk

        dialogs: list[str] = []

        def accept(dialog: Any) -> None:
            dialogs.append(dialog.message)
            dialog.accept()

        page.on("dialog", accept)
        page.click("#roll-back")
        page.wait_for_url(lambda u: u != url and "/tuning/rollouts/" in u)
        assert dialogs and "Roll back this rollout?" in dialogs[0]
        page.wait_for_selector('#rollout-status[data-state="succeeded"]', timeout=30000)
        assert "Rollback #" in page.inner_text("h1")
        for node, agent in nodes:
            assert agent.applied() == v1.pk
            wait_for(lambda n=node: Node.objects.get(pk=n.pk).applied_tier_config_id == v1.pk)
    finally:
        connections.close_all()
