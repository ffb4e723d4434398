"""Each tier config field's description (scheduler/config.py) where an operator reads it: the
form editor's help beside each field, the API's OpenAPI schema for the `config` document; and a
removed field refused by the API with a 400 naming it and saying why (issue 57, item 4)."""

from __future__ import annotations

import copy
import json
import re
from io import StringIO
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.test import Client

from console.tuning.models import TierConfigVersion
from scheduler.reference import fields
from tests.conftest import sign_in

URL = "/api/v1/tier-configs/"


@pytest.mark.parametrize(
    ("where", "name", "value", "why"),
    [
        (("queues", "batch"), "stream_pace_ms", 100, "superseded by stream_interval_tokens"),
        (("admission",), "reserve_caps_lower_tiers", True, "no gain"),
    ],
)
def test_the_api_refuses_a_removed_field_naming_it_and_why(
    api: Any,
    operator: Any,
    seed_tiers: dict[str, Any],
    where: tuple[str, ...],
    name: str,
    value: Any,
    why: str,
) -> None:
    config = copy.deepcopy(seed_tiers)
    section = config["scheduler"]
    for key in where:
        section = section.setdefault(key, {})
    section[name] = value
    response = api(operator).post(
        URL, {"name": "old", "message": "", "config": config}, format="json"
    )
    assert response.status_code == 400, response.content
    (error,) = response.json()["config"]
    assert error.startswith(".".join(("scheduler", *where, name)) + ": removed: "), error
    assert why in error
    assert not TierConfigVersion.objects.exists()


@pytest.mark.django_db
def test_the_openapi_schema_describes_every_field_of_the_config_document() -> None:
    out = StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    components = yaml.safe_load(out.getvalue())["components"]["schemas"]
    for shape in ("TierConfigVersion", "TierConfigVersionRequest"):
        config = components[shape]["properties"]["config"]
        assert config["allOf"] == [{"$ref": "#/components/schemas/TierConfigDocument"}], shape
    scheduler = components["TierConfigDocument"]["properties"]["scheduler"]["properties"]
    sections = {
        "queues": scheduler["queues"]["additionalProperties"]["properties"],
        "adaptive": scheduler["adaptive"]["properties"],
        "admission": scheduler["admission"]["properties"],
    }
    for path, prop, _ in fields():
        section, name = path.split(".")[0], path.split(".")[-1]
        described = sections[section][name]
        assert described["description"] == prop["description"], path
    shed = sections["admission"]["shed_after_ms"]  # OpenAPI 3.0's shape, not JSON Schema's
    assert shed["type"] == "number" and shed["nullable"] is True
    assert (shed["minimum"], shed["exclusiveMinimum"], shed["default"]) == (0, True, 30000)
    assert "stream_pace_ms" not in sections["queues"]
    assert "reserve_caps_lower_tiers" not in sections["admission"]


def test_the_create_page_gives_the_form_editor_every_fields_description(operator: Any) -> None:
    client = Client()
    client.force_login(operator)
    html = client.get("/tuning/tier-configs/new/").content.decode()
    match = re.search(r'<script id="tier-schema" type="application/json">(.*?)</script>', html)
    assert match is not None
    embedded = json.loads(match.group(1))
    defs = embedded["$defs"]
    sections = {
        "queues": "QueueConfig",
        "adaptive": "AdaptiveConfig",
        "admission": "AdmissionConfig",
    }
    for path, prop, _ in fields():
        section, name = path.split(".")[0], path.split(".")[-1]
        assert defs[sections[section]]["properties"][name]["description"] == prop["description"]


@pytest.mark.browser
def test_the_form_editor_shows_each_fields_description_as_help(
    transactional_db: None, operator: Any, seed_tiers: dict[str, Any], browser_page: Any
) -> None:
    page = browser_page
    sign_in(page, "otto")
    page.goto("/tuning/tier-configs/new/")
    page.fill("textarea[name=config]", json.dumps(seed_tiers))
    page.dispatch_event("textarea[name=config]", "input")
    helps = page.locator("#tier-editor .editor-help")
    assert helps.count() == len(fields())  # one per settable field, queue fields once
    by_path = {path: prop["description"] for path, prop, _ in fields()}
    row = page.locator("#tier-editor-queues tr", has_text="length_groups")
    assert by_path["queues.<tier>.length_groups"] in row.inner_text()
    label = page.locator("label", has=page.locator("[name='tier-editor.admission.shed_after_ms']"))
    assert by_path["admission.shed_after_ms"] in label.inner_text()
    assert label.locator(".editor-help").is_visible()
