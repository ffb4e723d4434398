"""The API tokens page in Chromium: a token made there works against the live API."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import sign_in

pytestmark = pytest.mark.browser


def test_an_operator_makes_a_token_uses_it_and_revokes_it(
    transactional_db: None, operator: Any, browser_page: Any, live_server: Any
) -> None:
    page = browser_page
    sign_in(page, "otto")
    page.click("header .who >> text=API tokens")
    page.wait_for_url("**/accounts/tokens/")
    page.fill("#id_name", "nightly")
    page.click("text=Create token")
    token = page.locator("#api-token").inner_text().strip()
    assert token.startswith("tgt_")
    headers = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{live_server.url}/api/v1/rollouts/", headers=headers).status_code == 200
    page.goto("/accounts/tokens/")
    assert page.locator("#api-token").count() == 0  # shown once
    row = page.locator("tr", has_text="nightly")
    assert "active" in row.inner_text()
    page.once("dialog", lambda dialog: dialog.accept())
    row.locator("button", has_text="Revoke").click()
    page.wait_for_selector("text=revoked")
    assert httpx.get(f"{live_server.url}/api/v1/rollouts/", headers=headers).status_code == 401
