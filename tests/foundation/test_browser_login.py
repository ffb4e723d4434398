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
