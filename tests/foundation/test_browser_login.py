from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import sign_in

pytestmark = pytest.mark.browser


def test_a_user_signs_in_and_sees_the_navigation(
    transactional_db: None, viewer: Any, browser_page: Any
) -> None:
    page = browser_page
    sign_in(page, "vera")
    assert page.locator("header .who").inner_text().startswith("vera")
    page.goto("/healthz?worker=0")
    assert page.locator("h1").inner_text().startswith("Health")


def test_no_page_of_a_walk_asks_for_something_missing(
    transactional_db: None, operator: Any, browser_page: Any
) -> None:
    page = browser_page
    missing: list[str] = []
    page.on("response", lambda r: missing.append(r.url) if r.status >= 400 else None)
    sign_in(page, "otto")
    for path in ["/", "/fleet/", "/benchmarks/", "/tuning/tier-configs/", "/api/v1/docs/"]:
        page.goto(path)
        page.wait_for_load_state("networkidle")
    assert missing == []
    icon = page.request.get("/favicon.ico")
    assert icon.ok and "svg" in icon.headers["content-type"]
