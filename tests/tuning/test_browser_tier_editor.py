"""The tier config form editor in Chromium: fields per tier from the scheduler's schema, in
step with the JSON both ways; what it writes is what the version stores."""

from __future__ import annotations

import json
from typing import Any

import pytest

from console.tuning.models import TierConfigVersion
from tests.conftest import sign_in

pytestmark = pytest.mark.browser


def config_text(page: Any) -> dict[str, Any]:
    return json.loads(page.input_value("textarea[name=config]"))  # type: ignore[no-any-return]


def test_fields_edit_the_json_and_the_json_redraws_the_fields(
    transactional_db: None, operator: Any, seed_tiers: dict[str, Any], browser_page: Any
) -> None:
    page = browser_page
    sign_in(page, "otto")
    page.goto("/tuning/tier-configs/new/")
    page.fill("textarea[name=config]", json.dumps(seed_tiers))
    page.dispatch_event("textarea[name=config]", "input")
    cell = page.locator("[name='tier-editor.online.max_batch_size']")
    assert cell.input_value() == "8"
    cell.fill("16")
    page.fill("[name='tier-editor.batch.queue_timeout_ms']", "30000")
    page.select_option("[name='tier-editor.admission.pass_priority']", "false")
    doc = config_text(page)
    assert doc["scheduler"]["queues"]["online"]["max_batch_size"] == 16
    assert doc["scheduler"]["queues"]["batch"]["queue_timeout_ms"] == 30000
    assert doc["scheduler"]["admission"] == {"pass_priority": False}
    # Emptying a box means "the default": the key goes away.
    page.fill("[name='tier-editor.batch.queue_timeout_ms']", "")
    assert "queue_timeout_ms" not in config_text(page)["scheduler"]["queues"]["batch"]
    # And the other way: the JSON typed by hand redraws the fields.
    doc = config_text(page)
    doc["scheduler"]["queues"]["offline"]["priority"] = 7
    page.fill("textarea[name=config]", json.dumps(doc))
    page.dispatch_event("textarea[name=config]", "input")
    assert page.locator("[name='tier-editor.offline.priority']").input_value() == "7"
    page.fill("input[name=name]", "edited")
    page.click("#create-version")
    page.wait_for_url("**/tier-configs/*/")
    stored = TierConfigVersion.objects.get(name="edited").config["scheduler"]
    assert stored["queues"]["online"]["max_batch_size"] == 16
    assert stored["queues"]["offline"]["priority"] == 7
    assert stored["admission"]["pass_priority"] is False


def test_a_bad_value_from_the_fields_is_refused_naming_the_field(
    transactional_db: None, operator: Any, seed_tiers: dict[str, Any], browser_page: Any
) -> None:
    page = browser_page
    sign_in(page, "otto")
    page.goto("/tuning/tier-configs/new/")
    page.fill("textarea[name=config]", json.dumps(seed_tiers))
    page.dispatch_event("textarea[name=config]", "input")
    page.fill("[name='tier-editor.online.max_batch_size']", "0")
    page.fill("#tier-editor-new", "bulk")
    page.click("#tier-editor-add")
    assert config_text(page)["scheduler"]["queues"]["bulk"]["priority"] == 4
    page.fill("input[name=name]", "broken")
    page.click("#create-version")
    assert "queues.online.max_batch_size" in page.locator("#errors-config").inner_text()
    assert not TierConfigVersion.objects.filter(name="broken").exists()
    page.fill("textarea[name=config]", "{not json")
    page.dispatch_event("textarea[name=config]", "input")
    assert "does not parse" in page.locator("#tier-editor-error").inner_text()
