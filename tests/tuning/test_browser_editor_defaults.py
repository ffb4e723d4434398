"""In Chromium: the tier-config editor's "an empty box means the field's default" holds for every
field, those every tier must set included; a new version made from v1 shows v1 as what it was
made from and its one change (issue 58)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from console.tuning.models import TierConfigVersion
from tests.conftest import sign_in

pytestmark = pytest.mark.browser


def test_emptying_a_required_box_gives_the_seed_default_and_the_version_diffs_against_v1(
    transactional_db: None, operator: Any, browser_page: Any
) -> None:
    from console.tuning.demo import tighter_online
    from console.tuning.services import create_tier_config
    from scheduler import config_to_dict, default_config

    seed = config_to_dict(default_config())
    v1 = create_tier_config(name="default", config=seed, message="seed")
    create_tier_config(name="default", config=tighter_online(seed), message="v2")
    page = browser_page
    sign_in(page, "otto")
    page.goto(f"/tuning/tier-configs/new/?from={v1.pk}")
    wait = page.locator("[name='tier-editor.online.max_waiting_time_ms']")
    assert wait.input_value() == "10"
    wait.fill("")  # "an empty box means the field's default"
    assert wait.get_attribute("placeholder") == "10"
    document = json.loads(page.input_value("textarea[name=config]"))
    assert document["scheduler"]["queues"]["online"]["max_waiting_time_ms"] == 10
    # An optional field's box shows its default too, and emptied leaves the field out.
    depth = page.locator("[name='tier-editor.online.max_queue_depth']")
    assert depth.get_attribute("placeholder") == "none"
    page.fill("[name='tier-editor.online.max_batch_size']", "16")  # the one change
    page.fill("input[name=message]", "bigger online batches")
    page.click("#create-version")
    page.wait_for_url("**/tier-configs/*/")
    assert not page.locator(".field-errors").count(), page.inner_text("#version-form")
    v3 = TierConfigVersion.objects.get(name="default", version=3)
    assert v3.parent_id == v1.pk
    assert v3.config["scheduler"]["queues"]["online"]["max_waiting_time_ms"] == 10
    assert page.inner_text("#made-from") == "default v1"
    rows = page.locator("#diff tr[data-path]")
    paths = [rows.nth(i).get_attribute("data-path") for i in range(rows.count())]
    assert paths == ["scheduler.queues.online.max_batch_size"], paths
    assert re.search(r"Made from", page.inner_text(".card dl.meta"))
