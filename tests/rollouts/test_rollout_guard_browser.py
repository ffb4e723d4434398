"""In Chromium: a rollout whose canary is too quiet for the SLO guard, set to pause and ask,
shows itself paused and "not judged yet"; Resume (confirmed) lets it finish, and the page and
the list then say it was unguarded. Real agent, simulator and an in-process worker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import sign_in
from tests.rollouts.rollout_helpers import InlineWorker

pytestmark = pytest.mark.browser


@pytest.fixture
def inline_worker(transactional_db: None) -> Iterator[InlineWorker]:
    worker = InlineWorker()
    worker.start()
    yield worker
    worker.stop()


def test_a_paused_rollout_says_unguarded_once_resumed(
    fleet: Any, versions: Any, operator: Any, browser_page: Any, inline_worker: InlineWorker
) -> None:
    from django.db import connections

    from console.tuning.rollouts import services

    # Playwright's sync API gives this body's ORM calls a connection of their own: close it,
    # or PostgreSQL refuses to drop the test database at the end.
    try:
        _, v2 = versions
        ((_, agent),) = fleet(1)
        rollout = services.create_rollout(
            tier_config=v2,
            canary_count=1,
            canary_soak_s=1.0,
            convergence_timeout_s=15,
            guard_when_quiet="pause",
            start=False,  # the inline worker picks it up
        )
        page = browser_page
        sign_in(page, operator.username)
        page.goto(f"/tuning/rollouts/{rollout.pk}/")
        page.wait_for_selector('#rollout-status[data-state="paused"]', timeout=30000)
        assert page.inner_text("#rollout-guard") == "SLO guard: not judged yet"
        assert "SLO guard could not judge" in page.inner_text("#rollout-reason")
        assert "paused:" in page.inner_text("#rollout-events")
        assert "a wave too quiet to judge is paused to ask" in page.inner_text("dl.meta")

        dialogs: list[str] = []

        def accept(dialog: Any) -> None:
            dialogs.append(dialog.message)
            dialog.accept()

        page.on("dialog", accept)
        page.click("#resume")
        page.wait_for_selector('#rollout-status[data-state="succeeded"]', timeout=30000)
        assert dialogs and "goes on without a guard verdict (unguarded)" in dialogs[0]
        guard = "SLO guard: unguarded (1 wave(s) unguarded)"
        assert page.inner_text("#rollout-guard") == guard
        assert "goes on without a guard verdict (unguarded)" in page.inner_text("#rollout-events")
        assert agent.applied() == v2.pk

        page.goto("/tuning/rollouts/")
        row = page.locator(f'tr[data-rollout="{rollout.pk}"] td.guard')
        assert row.inner_text() == "unguarded (1 wave(s) unguarded)"
    finally:
        connections.close_all()
