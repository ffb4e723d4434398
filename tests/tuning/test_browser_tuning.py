"""A person pastes seed 000's tier JSON as a new version and reads its diff."""

from __future__ import annotations

import json
from typing import Any

import pytest

from console.tuning import services
from tests.conftest import sign_in

pytestmark = pytest.mark.browser


def test_pasting_the_seed_json_makes_a_new_version_with_its_diff(
    transactional_db: None, operator: Any, seed_tiers: dict[str, Any], browser_page: Any
) -> None:
    first = json.loads(json.dumps(seed_tiers))
    first["scheduler"]["queues"]["online"]["max_waiting_time_ms"] = 25
    services.create_tier_config(name="prod", config=first, message="before the seed", user=operator)

    page = browser_page
    sign_in(page, "otto")
    page.goto("/tuning/tier-configs/new/")
    page.fill("input[name=name]", "prod")
    page.fill("input[name=message]", "seed 000 verbatim")
    page.fill("textarea[name=config]", json.dumps(seed_tiers, indent=2))
    page.click("#create-version")

    diff = page.locator("table#diff")
    diff.wait_for()
    assert "prod v1" in diff.locator("caption").inner_text()
    row = diff.locator('tr[data-path="scheduler.queues.online.max_waiting_time_ms"]')
    assert row.locator("td.old").inner_text() == "25"
    assert row.locator("td.new").inner_text() == "10"
    assert diff.locator("tbody tr").count() == 1
    assert "prod v2" in page.locator("h1").inner_text()


def test_a_broken_paste_shows_the_field_errors_and_creates_nothing(
    transactional_db: None, operator: Any, bad_tiers: dict[str, Any], browser_page: Any
) -> None:
    page = browser_page
    sign_in(page, "otto")
    page.goto("/tuning/tier-configs/new/")
    page.fill("input[name=name]", "prod")
    page.fill("textarea[name=config]", json.dumps(bad_tiers))
    page.click("#create-version")
    errors = page.locator("#errors-config").inner_text()
    for field in ("priority", "max_batch_size", "wait_time_reduction_ratio"):
        assert field in errors
    from console.tuning.models import TierConfigVersion

    assert not TierConfigVersion.objects.filter(name="prod").exists()
