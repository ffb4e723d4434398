"""A version remembers the version it was made from, and its page diffs against that; "roll back
this version" sends each node to what that node had before, and a rollout's "Changes applied"
lists every node's move (issue 58)."""

from __future__ import annotations

import json
import re
from html import unescape
from typing import Any

import pytest
from django.test import Client

from tests.rollouts.rollout_helpers import tier_config


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def four(db: None) -> list[Any]:
    """tiers v1..v4, each with a different online waiting time (1, 2, 3, 4 ms)."""
    from console.tuning.services import create_tier_config

    return [
        create_tier_config(name="tiers", config=tier_config(ms), message=f"v{ms}")
        for ms in (1, 2, 3, 4)
    ]


def test_a_version_made_from_v1_is_diffed_against_v1(operator: Any, four: list[Any]) -> None:
    from console.tuning.models import TierConfigVersion

    v1 = four[0]
    client = _client(operator)
    form = client.get(f"/tuning/tier-configs/new/?from={v1.pk}").content.decode()
    assert f'name="parent" value="{v1.pk}"' in form
    # From v1, one field changed: the online tier's batch size.
    document = tier_config(1, online_batch=16)
    response = client.post(
        "/tuning/tier-configs/new/",
        {
            "name": "tiers",
            "message": "bigger batches",
            "config": json.dumps(document),
            "parent": v1.pk,
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    v5 = TierConfigVersion.objects.get(name="tiers", version=5)
    assert v5.parent_id == v1.pk
    page = unescape(client.get(f"/tuning/tier-configs/{v5.pk}/").content.decode())
    assert re.search(r'id="made-from"><a href="[^"]+">tiers v1</a>', page)
    paths = re.findall(r'data-path="([^"]+)"', page)
    assert paths == ["scheduler.queues.online.max_batch_size"], paths
    # The API's diff takes the same side.
    diff = client.get(f"/api/v1/tier-configs/{v5.pk}/diff/").json()
    assert diff["against"]["version"] == 1
    assert [c["path"] for c in diff["changes"]] == ["scheduler.queues.online.max_batch_size"]


def test_the_api_takes_and_shows_a_parent(api: Any, operator: Any, four: list[Any]) -> None:
    body = {"name": "tiers", "config": tier_config(1, online_batch=16), "parent": four[1].pk}
    response = api(operator).post("/api/v1/tier-configs/", body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["parent"] == four[1].pk
    missing = api(operator).post(
        "/api/v1/tier-configs/", {**body, "parent": 999_999}, format="json"
    )
    assert missing.status_code == 400 and "parent" in missing.json()


def test_rolling_back_a_version_sends_each_node_to_what_it_had_before(
    operator: Any, four: list[Any]
) -> None:
    from django.utils import timezone

    from console.fleet.models import Node
    from console.fleet.services import create_node, set_desired
    from console.tuning.rollouts.models import Rollout

    v1, v2, _v3, v4 = four
    a, _ = create_node("gpu-a", [], None)
    b, _ = create_node("gpu-b", [], None)
    set_desired([a], tier_config=v4, reason="test")
    set_desired([b], tier_config=v1, reason="test")
    set_desired([a, b], tier_config=v2, reason="test")  # a: v4 -> v2, b: v1 -> v2
    Node.objects.update(last_seen_at=timezone.now(), health={"gateway": "ok", "engine": "ok"})
    client = _client(operator)
    page = unescape(client.get(f"/tuning/tier-configs/{v2.pk}/").content.decode())
    plan = page[page.index('id="rollback-plan"') :]
    plan = plan[: plan.index("</p>")]
    assert "gpu-a → tiers v4" in plan and "gpu-b → tiers v1" in plan
    assert "Roll back to what each node had before" in page

    response = client.post(f"/tuning/tierconfig/{v2.pk}/roll-back/")
    assert response.status_code == 302
    rollout = Rollout.objects.get()
    targets = dict(rollout.nodes.values_list("node__name", "target_tier_config_id"))
    assert targets == {"gpu-a": v4.pk, "gpu-b": v1.pk}
    assert rollout.kind == "rollback" and rollout.tier_config is None

    # Its page lists both nodes' moves, each from v2 to what it had.
    detail = unescape(client.get(response["Location"]).content.decode())
    captions = re.findall(r'<caption class="muted" data-nodes="([^"]*)">(.*?)</caption>', detail)
    moves = {nodes: re.sub(r"<[^>]+>", "", text) for nodes, text in captions}
    assert moves == {
        "gpu-a": "Tier config on gpu-a: from tiers v2 to tiers v4",
        "gpu-b": "Tier config on gpu-b: from tiers v2 to tiers v1",
    }


def test_changes_applied_lists_every_nodes_move(operator: Any, four: list[Any]) -> None:
    from django.utils import timezone

    from console.fleet.models import Node
    from console.fleet.services import create_node, set_desired
    from console.tuning.rollouts.services import create_rollout

    v1, v2, _v3, v4 = four
    a, _ = create_node("gpu-a", [], None)
    b, _ = create_node("gpu-b", [], None)
    set_desired([a], tier_config=v4, reason="test")
    set_desired([b], tier_config=v1, reason="test")
    Node.objects.update(last_seen_at=timezone.now(), health={"gateway": "ok", "engine": "ok"})
    rollout = create_rollout(tier_config=v2, start=False)
    detail = unescape(_client(operator).get(f"/tuning/rollouts/{rollout.pk}/").content.decode())
    captions = re.findall(r'<caption class="muted" data-nodes="([^"]*)">(.*?)</caption>', detail)
    moves = {nodes: re.sub(r"<[^>]+>", "", text) for nodes, text in captions}
    assert moves == {
        "gpu-a": "Tier config on gpu-a: from tiers v4 to tiers v2",
        "gpu-b": "Tier config on gpu-b: from tiers v1 to tiers v2",
    }
    # Each table holds its own node's change: v1 -> v2 is the online wait 1 -> 2.
    assert detail.count('data-path="scheduler.queues.online.max_waiting_time_ms"') == 2
