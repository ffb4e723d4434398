"""The playground in Chromium: two answers stream side by side, then reopen from the list."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import sign_in

pytestmark = pytest.mark.browser


def test_an_operator_sees_two_answers_stream_and_reopens_them(
    transactional_db: None, operator: Any, endpoints: dict[str, Any], browser_page: Any
) -> None:
    page = browser_page
    sign_in(page, "otto")
    page.click("nav.mainnav >> text=Playground")
    page.select_option("#id_endpoint_a", label=str(endpoints["gateway"]))
    page.fill("#id_tier_a", "batch")
    page.select_option("#id_endpoint_b", label=str(endpoints["direct"]))
    page.fill("#id_conversation", "Tell me something")
    page.fill("#id_max_tokens", "16")
    page.click("text=Send to both")
    for side in ("a", "b"):
        page.wait_for_selector(f"#side-{side}[data-finished=done]")
        ttft = page.locator(f"#side-{side} [data-field=ttft_ms]").inner_text()
        assert float(ttft) > 0
        assert "16 out" in page.locator(f"#side-{side} [data-field=tokens]").inner_text()
        assert page.locator(f"#side-{side} [data-field=text]").inner_text().strip()
    assert page.locator("#side-a [data-field=tier]").inner_text() == "batch"
    answer = page.locator("#side-b [data-field=text]").inner_text()
    page.click("text=All comparisons")
    page.click("td >> text=Tell me something")
    assert page.locator("#side-b [data-field=text]").inner_text() == answer
    assert page.locator("#side-b [data-field=status]").inner_text() == "Done"
