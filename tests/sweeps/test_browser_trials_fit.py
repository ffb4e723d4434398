"""In Chromium at 1,400 px: a finished sweep's trials table fits its card, Adopt in view without
scrolling sideways (issue 58)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import sign_in
from tests.sweeps.ui_data import finished_sweep, node_with_versions

pytestmark = pytest.mark.browser

FITS_JS = """() => {
  const card = document.querySelector('#trials').closest('.card');
  const page = document.documentElement.scrollWidth;
  return {scroll: card.scrollWidth, client: card.clientWidth, page: page};
}"""


@pytest.mark.parametrize("width", [1400, 1280])
def test_the_trials_table_fits_and_adopt_is_in_view(
    transactional_db: None, operator: Any, browser_page: Any, width: int
) -> None:
    sweep = finished_sweep(node_with_versions())
    page = browser_page
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, "otto")
    page.goto(f"/benchmarks/sweeps/{sweep.pk}/", timeout=90_000)
    page.wait_for_selector("#adopt-1")
    fits = page.evaluate(FITS_JS)
    assert fits["scroll"] <= fits["client"], fits
    assert fits["page"] <= width, fits
    box = page.locator("#adopt-1").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box
