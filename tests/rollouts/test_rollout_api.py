"""REST API and pages of rollouts, without agents (nothing here waits on a heartbeat)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command


@pytest.fixture
def setup(db: None) -> dict[str, Any]:
    from console.fleet.services import create_node, set_desired
    from console.tuning.services import create_tier_config
    from tests.rollouts.rollout_helpers import tier_config

    v1 = create_tier_config(name="tiers", config=tier_config(1), message="v1")
    v2 = create_tier_config(name="tiers", config=tier_config(2), message="v2")
    nodes = [
        create_node(name, labels, None)[0]
        for name, labels in (("gpu-a", ["zone-a"]), ("gpu-b", ["zone-b"]))
    ]
    set_desired(nodes, tier_config=v1)
    _seen(nodes)
    return {"v1": v1, "v2": v2, "nodes": nodes}


def _seen(nodes: list[Any]) -> None:
    """As if their agents had just reported healthy (no agent runs in these tests)."""
    from django.utils import timezone

    from console.fleet.models import Node

    Node.objects.filter(pk__in=[n.pk for n in nodes]).update(
        last_seen_at=timezone.now(), health={"gateway": "ok", "engine": "ok", "detail": ""}
    )


def test_an_operator_creates_a_rollout_and_reads_it_back(
    api: Any, operator: Any, viewer: Any, setup: dict[str, Any]
) -> None:
    from console.audit.models import AuditEvent

    response = api(operator).post(
        "/api/v1/rollouts/",
        {
            "tier_config": setup["v2"].pk,
            "node_selection": "label",
            "label": "zone-b",
            "canary_count": 1,
            "guard_max_ttft_p99_regression_pct": 20,
            "guard_window_s": 10,
            "message": "tighter online",
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["state"] == "pending" and body["target"] == "tiers v2" and body["node_count"] == 1
    assert [n["node_name"] for n in body["nodes"]] == ["gpu-b"]
    assert body["events"][0]["message"].startswith("created by otto")
    assert AuditEvent.objects.filter(action="rollout", object_id=str(body["id"])).exists()

    listed = api(viewer).get("/api/v1/rollouts/").json()
    assert [r["id"] for r in listed["results"]] == [body["id"]]
    assert api(viewer).get(f"/api/v1/rollouts/{body['id']}/").json()["guard_window_s"] == 10


def test_the_guard_watches_the_most_urgent_tier_of_the_config_unless_told(
    api: Any, operator: Any, setup: dict[str, Any]
) -> None:
    from console.tuning.services import create_tier_config
    from tests.rollouts.rollout_helpers import tier_config

    doc = tier_config(1)
    queues = doc["scheduler"]["queues"]
    queues["interactive"] = {**queues["online"], "priority": 0}  # more urgent than online
    renamed = create_tier_config(name="tiers", config=doc, message="an interactive tier")

    def create(payload: dict[str, Any]) -> str:
        response = api(operator).post("/api/v1/rollouts/", payload, format="json")
        assert response.status_code == 201, response.json()
        from console.tuning.rollouts.models import Rollout

        rollout = Rollout.objects.get(pk=response.json()["id"])
        rollout.delete()  # leave the nodes free for the next one
        return rollout.guard_tier

    assert create({"tier_config": renamed.pk}) == "interactive"
    assert create({"tier_config": setup["v2"].pk}) == "online"  # the seed's tier names
    assert create({"tier_config": renamed.pk, "guard_tier": "batch"}) == "batch"


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({}, "tier_config"),
        ({"tier_config": 99999}, "tier_config"),
        ({"node_selection": "nodes", "nodes": []}, "nodes"),
        ({"node_selection": "nodes", "nodes": [99999]}, "nodes"),
        ({"node_selection": "label", "label": "nowhere"}, "label"),
        ({"node_selection": "everything"}, "node_selection"),
        ({"guard_max_error_rate": 2}, "guard_max_error_rate"),
        ({"canary_count": -1}, "canary_count"),
        ({"convergence_timeout_s": 0}, "convergence_timeout_s"),
    ],
)
def test_bad_input_gets_400_naming_the_field(
    api: Any, operator: Any, setup: dict[str, Any], payload: dict[str, Any], field: str
) -> None:
    data = (
        {"tier_config": setup["v2"].pk, **payload}
        if payload and "tier_config" not in payload
        else payload
    )
    response = api(operator).post("/api/v1/rollouts/", data, format="json")
    assert response.status_code == 400
    assert field in response.json(), response.json()


def test_a_node_in_an_unfinished_rollout_cannot_join_another(
    api: Any, operator: Any, setup: dict[str, Any]
) -> None:
    client = api(operator)
    assert (
        client.post("/api/v1/rollouts/", {"tier_config": setup["v2"].pk}, format="json").status_code
        == 201
    )
    response = client.post("/api/v1/rollouts/", {"tier_config": setup["v1"].pk}, format="json")
    assert response.status_code == 400 and "unfinished" in response.json()["nodes"][0]


def test_a_viewer_cannot_start_abort_or_roll_back(
    api: Any, viewer: Any, operator: Any, setup: dict[str, Any]
) -> None:
    assert (
        api(viewer)
        .post("/api/v1/rollouts/", {"tier_config": setup["v2"].pk}, format="json")
        .status_code
        == 403
    )
    rid = (
        api(operator)
        .post("/api/v1/rollouts/", {"tier_config": setup["v2"].pk}, format="json")
        .json()["id"]
    )
    assert api(viewer).post(f"/api/v1/rollouts/{rid}/abort/").status_code == 403
    assert api(viewer).post(f"/api/v1/rollouts/{rid}/rollback/").status_code == 403


def test_abort_before_any_node_was_touched_ends_aborted(
    api: Any, operator: Any, setup: dict[str, Any]
) -> None:
    from console.tuning.rollouts.executor import Executor
    from console.tuning.rollouts.models import Rollout

    client = api(operator)
    rid = client.post("/api/v1/rollouts/", {"tier_config": setup["v2"].pk}, format="json").json()[
        "id"
    ]
    assert client.post(f"/api/v1/rollouts/{rid}/rollback/").json() == {
        "state": [f"Rollout #{rid} is still pending: abort it instead"]
    }
    executor = Executor(rid, sleep=lambda s: None)
    assert executor.claim()  # a worker holds it: abort only asks
    body = client.post(f"/api/v1/rollouts/{rid}/abort/").json()
    assert body["abort_requested"] is True and body["state"] == "pending"
    assert executor.run() == "aborted"
    rollout = Rollout.objects.get(pk=rid)
    assert rollout.reason == "aborted by an operator"
    assert set(rollout.nodes.values_list("state", flat=True)) == {"pending"}
    for node in setup["nodes"]:
        node.refresh_from_db()
        assert node.desired_tier_config_id == setup["v1"].pk  # never touched
    assert client.post(f"/api/v1/rollouts/{rid}/abort/").status_code == 400
    assert "already" in client.post(f"/api/v1/rollouts/{rid}/rollback/").json()["state"][0]


def test_a_rollback_itself_cannot_be_rolled_back(
    api: Any, operator: Any, setup: dict[str, Any]
) -> None:
    from console.tuning.rollouts.choices import RolloutKind, RolloutState
    from console.tuning.rollouts.models import Rollout

    client = api(operator)
    rid = client.post("/api/v1/rollouts/", {"tier_config": setup["v2"].pk}, format="json").json()[
        "id"
    ]
    Rollout.objects.filter(pk=rid).update(kind=RolloutKind.ROLLBACK, state=RolloutState.SUCCEEDED)
    rollback = Rollout.objects.get(pk=rid)
    assert not rollback.can_roll_back
    response = client.post(f"/api/v1/rollouts/{rid}/rollback/")
    assert response.status_code == 400 and "itself a rollback" in response.json()["kind"][0]
    assert Rollout.objects.count() == 1


def test_a_second_executor_cannot_take_a_rollout_whose_lease_is_held(setup: dict[str, Any]) -> None:
    from console.tuning.rollouts import services
    from console.tuning.rollouts.executor import Executor

    rollout = services.create_rollout(tier_config=setup["v2"], start=False)
    first, second = Executor(rollout.pk, owner="one"), Executor(rollout.pk, owner="two")
    assert first.claim()
    assert not second.claim()
    assert second.run() == ""  # returns at once, touching nothing
    assert first.claim()  # renewing its own lease
    first.release()
    assert second.claim()


def test_the_lease_is_renewed_only_once_half_of_it_has_run_out(setup: dict[str, Any]) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from console.tuning.rollouts import services
    from console.tuning.rollouts.executor import Executor, lease_s
    from console.tuning.rollouts.models import Rollout

    rollout = services.create_rollout(tier_config=setup["v2"], start=False)
    clock = [timezone.now()]
    executor = Executor(rollout.pk, owner="one", now=lambda: clock[0])
    assert executor.claim()
    assert executor._holds(Rollout.objects.get(pk=rollout.pk))  # fresh: no write this poll
    clock[0] += timedelta(seconds=lease_s() * 0.6)
    assert not executor._holds(Rollout.objects.get(pk=rollout.pk))  # time to renew
    assert not Executor(rollout.pk, owner="two", now=lambda: clock[0])._holds(
        Rollout.objects.get(pk=rollout.pk)
    )


def test_roll_back_to_the_previous_version_from_the_version_page(
    client: Any, operator: Any, setup: dict[str, Any]
) -> None:
    from console.fleet.services import set_desired
    from console.tuning.rollouts.models import Rollout

    set_desired(setup["nodes"], tier_config=setup["v2"])
    client.force_login(operator)
    page = client.get(f"/tuning/tier-configs/{setup['v2'].pk}/").content.decode()
    assert 'id="roll-back-version"' in page and "data-confirm" in page
    response = client.post(f"/tuning/tierconfig/{setup['v2'].pk}/roll-back/")
    rollout = Rollout.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/tuning/rollouts/{rollout.pk}/"
    assert rollout.kind == "rollback" and rollout.tier_config_id == setup["v1"].pk
    assert sorted(rollout.nodes.values_list("node__name", flat=True)) == ["gpu-a", "gpu-b"]
    # v1 is the first version: nothing before it.
    client.post(f"/tuning/tierconfig/{setup['v1'].pk}/roll-back/")
    assert Rollout.objects.count() == 1


def test_pages_list_form_detail_and_live_fragment(
    client: Any, operator: Any, setup: dict[str, Any]
) -> None:
    from console.tuning.rollouts.models import Rollout

    client.force_login(operator)
    assert "No rollouts yet" in client.get("/tuning/rollouts/").content.decode()
    form = client.get("/tuning/rollouts/new/").content.decode()
    # The newest version not every node desires yet is preselected (the demo's v2).
    assert f'<option value="{setup["v2"].pk}" selected>' in form
    response = client.post(
        "/tuning/rollouts/new/",
        {
            "tier_config": setup["v2"].pk,
            "node_selection": "all",
            "canary_count": 1,
            "wave_size": 0,
            "stale_targets": "exclude",
            "convergence_timeout_s": 30,
            "canary_soak_s": 0,
            "guard_window_s": 30,
            "guard_tier": "online",
            "message": "",
        },
    )
    rollout = Rollout.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/tuning/rollouts/{rollout.pk}/"
    detail = client.get(response["Location"]).content.decode()
    assert f'data-live-url="/tuning/rollouts/{rollout.pk}/live/"' in detail
    assert (
        'data-path="scheduler.queues.online.max_waiting_time_ms"' in detail
    )  # the diff being applied
    assert 'id="abort"' in detail
    live = client.get(f"/tuning/rollouts/{rollout.pk}/live/").content.decode()
    assert 'data-node="gpu-a"' in live and "data-live-done" not in live
    assert f"Rollout #{rollout.pk}" in client.get("/tuning/rollouts/").content.decode()


def test_the_openapi_schema_has_the_rollout_routes_and_no_warnings(db: None) -> None:
    out = io.StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    schema = out.getvalue()
    for route in (
        "/api/v1/rollouts/:",
        "/api/v1/rollouts/{id}/abort/:",
        "/api/v1/rollouts/{id}/rollback/:",
    ):
        assert route in schema


def _beat(applied_tier: int | None, refused: int | None = None) -> Any:
    from console.fleet.schemas import HeartbeatIn

    body: dict[str, Any] = {
        "agent_version": "t",
        "mode": "attached",
        "listen_url": "",
        "keys_version": "",
        "applied": {"tier_config": applied_tier, "launch_profile": None},
        "health": {"gateway": "ok", "engine": "ok", "detail": ""},
        "samples": [],
    }
    if refused is not None:
        body["apply_errors"] = {"tier_config": {"version": refused, "error": "no"}}
    return HeartbeatIn.model_validate(body)


def test_a_beat_carrying_a_new_tier_config_asks_for_a_quick_follow_up(
    setup: dict[str, Any],
) -> None:
    from console.fleet.heartbeat import (
        FOLLOW_UP_INTERVAL_S,
        heartbeat_interval_s,
        node_for_token,
        process,
    )
    from console.fleet.services import rotate_node_token

    token = rotate_node_token(setup["nodes"][0], None)
    v1 = setup["v1"].pk
    assert (
        process(node_for_token(token), _beat(None))["heartbeat_interval_s"] == FOLLOW_UP_INTERVAL_S
    )
    assert (
        process(node_for_token(token), _beat(v1))["heartbeat_interval_s"] == heartbeat_interval_s()
    )
    # An agent that refuses the version is not hurried: that would change nothing.
    assert (
        process(node_for_token(token), _beat(None, refused=v1))["heartbeat_interval_s"]
        == heartbeat_interval_s()
    )


def test_aborting_a_pending_rollout_no_worker_holds_ends_it_at_once(
    api: Any, operator: Any, setup: dict[str, Any]
) -> None:
    client = api(operator)
    rid = client.post("/api/v1/rollouts/", {"tier_config": setup["v2"].pk}, format="json").json()[
        "id"
    ]
    body = client.post(f"/api/v1/rollouts/{rid}/abort/").json()
    assert body["state"] == "aborted" and body["reason"] == "aborted before it started"
    # Its nodes are free again.
    assert (
        client.post("/api/v1/rollouts/", {"tier_config": setup["v2"].pk}, format="json").status_code
        == 201
    )
