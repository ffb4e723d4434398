"""The rollout API and form: the defaults an operator gets (canary soak, SLO guard, stale
targets left out), how to turn them off, and the node health shown on a rollout's page coming
from the fleet's one rule. No agent runs here: nodes are marked as just seen."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone


@pytest.fixture
def setup(db: None) -> dict[str, Any]:
    from console.fleet.models import Node
    from console.fleet.services import create_node, set_desired
    from console.tuning.services import create_tier_config
    from tests.rollouts.rollout_helpers import tier_config

    v1 = create_tier_config(name="tiers", config=tier_config(1), message="v1")
    v2 = create_tier_config(name="tiers", config=tier_config(2), message="v2")
    live = create_node("live", [], None)[0]
    ghost = create_node("ghost", [], None)[0]
    set_desired([live, ghost], tier_config=v1)
    Node.objects.filter(pk=live.pk).update(
        last_seen_at=timezone.now(), health={"gateway": "ok", "engine": "ok", "detail": ""}
    )
    return {"v1": v1, "v2": v2, "live": live, "ghost": ghost}


def test_the_api_applies_the_defaults_and_leaves_out_a_never_seen_node(
    api: Any, operator: Any, setup: dict[str, Any]
) -> None:
    r = api(operator).post("/api/v1/rollouts/", {"tier_config": setup["v2"].pk}, format="json")
    assert r.status_code == 201, r.json()
    body = r.json()
    assert body["canary_soak_s"] == 60.0 and body["stale_targets"] == "exclude"
    assert body["guard_max_ttft_p99_regression_pct"] == 50.0
    assert body["guard_max_error_rate"] == 0.05
    assert [n["node_name"] for n in body["nodes"]] == ["live"]
    assert body["excluded_nodes"] == [
        {"id": setup["ghost"].pk, "name": "ghost", "status": "never seen"}
    ]


def test_the_guard_and_soak_can_be_turned_off(
    api: Any, operator: Any, setup: dict[str, Any]
) -> None:
    r = api(operator).post(
        "/api/v1/rollouts/",
        {
            "tier_config": setup["v2"].pk,
            "canary_soak_s": 0,
            "guard_max_ttft_p99_regression_pct": None,
            "guard_max_error_rate": None,
        },
        format="json",
    )
    assert r.status_code == 201, r.json()
    body = r.json()
    assert body["canary_soak_s"] == 0 and body["guard_max_error_rate"] is None
    assert body["guard_max_ttft_p99_regression_pct"] is None


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"stale_targets": "refuse"}, "stale_targets"),
        ({"stale_targets": "sometimes"}, "stale_targets"),
        ({"canary_soak_s": -1}, "canary_soak_s"),
        ({"canary_soak_s": 1e9}, "canary_soak_s"),
        ({"node_selection": "nodes", "nodes": ["ghost"]}, "nodes"),
    ],
)
def test_bad_or_refused_input_is_a_400_naming_the_field(
    api: Any, operator: Any, setup: dict[str, Any], payload: dict[str, Any], field: str
) -> None:
    from console.tuning.rollouts.models import Rollout

    r = api(operator).post(
        "/api/v1/rollouts/", {"tier_config": setup["v2"].pk, **payload}, format="json"
    )
    assert r.status_code == 400 and field in r.json(), r.json()
    assert not Rollout.objects.exists()


def test_refuse_names_the_never_seen_node(api: Any, operator: Any, setup: dict[str, Any]) -> None:
    r = api(operator).post(
        "/api/v1/rollouts/",
        {"tier_config": setup["v2"].pk, "stale_targets": "refuse"},
        format="json",
    )
    assert "ghost (never seen)" in r.json()["stale_targets"][0]


def test_the_form_shows_stale_targets_and_the_defaults(
    client: Any, operator: Any, setup: dict[str, Any]
) -> None:
    client.force_login(operator)
    html = client.get("/tuning/rollouts/new/").content.decode()
    assert 'id="stale-targets"' in html and "ghost</a> (new)" in html
    assert "ghost — never seen" in html  # on its checkbox too
    assert 'name="canary_soak_s" value="60.0"' in html
    assert 'name="guard_max_error_rate" value="0.05"' in html
    assert "Default 50 %" in html and "leave them out" in html


def test_a_rollout_page_shows_each_node_as_the_fleet_page_does(
    client: Any, operator: Any, setup: dict[str, Any]
) -> None:
    from console.fleet.models import Node
    from console.tuning.rollouts import services
    from console.tuning.rollouts.models import RolloutNode
    from tests.rollouts.rollout_helpers import QUICK

    rollout = services.create_rollout(tier_config=setup["v2"], start=False, **QUICK)
    # The rollout's step for the node says healthy; the node itself now reports an apply error.
    RolloutNode.objects.filter(rollout=rollout).update(state="healthy")
    Node.objects.filter(pk=setup["live"].pk).update(
        apply_errors={"gateway_keys": {"version": "x", "error": "bad keys"}}
    )
    client.force_login(operator)
    live = client.get(f"/tuning/rollouts/{rollout.pk}/live/").content.decode()
    assert 'data-node-status="degraded"' in live
    fleet = client.get("/fleet/live/").content.decode()
    assert "degraded" in fleet
    api_node = client.get(f"/api/v1/rollouts/{rollout.pk}/").json()["nodes"][0]
    assert api_node["state"] == "healthy" and api_node["node_status"] == "degraded"
    assert client.get(f"/api/v1/nodes/{setup['live'].pk}/").json()["status"] == "degraded"
