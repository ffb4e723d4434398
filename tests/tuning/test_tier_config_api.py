"""REST /api/v1/tier-configs/: immutable versions, roles, validation naming the field, diffs."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from console.audit.models import AuditEvent
from console.tuning.models import TierConfigVersion

URL = "/api/v1/tier-configs/"


def body(config: dict[str, Any], name: str = "prod", message: str = "seed") -> dict[str, Any]:
    return {"name": name, "message": message, "config": config}


@pytest.mark.django_db
def test_anonymous_gets_401_for_reads_and_writes(api: Any, seed_tiers: dict[str, Any]) -> None:
    assert api(None).get(URL).status_code == 401
    assert api(None).post(URL, body(seed_tiers), format="json").status_code == 401


def test_a_signed_in_user_without_a_role_gets_403(api: Any, outsider: Any) -> None:
    assert api(outsider).get(URL).status_code == 403


def test_a_viewer_reads_but_cannot_create(
    api: Any, viewer: Any, operator: Any, seed_tiers: dict[str, Any]
) -> None:
    created = api(operator).post(URL, body(seed_tiers), format="json").json()
    client = api(viewer)
    assert client.get(URL).json()["results"][0]["id"] == created["id"]
    assert client.get(f"{URL}{created['id']}/").json()["config"] == seed_tiers
    assert client.post(URL, body(seed_tiers), format="json").status_code == 403
    assert TierConfigVersion.objects.count() == 1


@pytest.mark.parametrize("who", ["operator", "admin_user"])
def test_operators_and_admins_create_numbered_versions(
    api: Any, who: str, request: Any, seed_tiers: dict[str, Any]
) -> None:
    user = request.getfixturevalue(who)
    client = api(user)
    first = client.post(URL, body(seed_tiers), format="json")
    assert first.status_code == 201, first.content
    data = first.json()
    assert (data["name"], data["version"], data["message"], data["author"]) == (
        "prod",
        1,
        "seed",
        user.username,
    )
    assert data["config"] == seed_tiers
    assert data["display"] == "prod v1"
    assert data["url"].endswith(f"{URL}{data['id']}/")
    second = client.post(URL, body(seed_tiers, message="again"), format="json").json()
    other = client.post(URL, body(seed_tiers, name="canary"), format="json").json()
    assert (second["version"], other["version"]) == (2, 1)


def test_the_version_number_cannot_be_chosen_by_the_client(
    api: Any, operator: Any, seed_tiers: dict[str, Any]
) -> None:
    data = api(operator).post(URL, {**body(seed_tiers), "version": 7}, format="json").json()
    assert data["version"] == 1


@pytest.mark.parametrize("method", ["put", "patch", "delete"])
def test_versions_are_immutable_405(
    api: Any, operator: Any, admin_user: Any, method: str, seed_tiers: dict[str, Any]
) -> None:
    obj = api(operator).post(URL, body(seed_tiers), format="json").json()
    for user in (operator, admin_user):
        response = getattr(api(user), method)(
            f"{URL}{obj['id']}/", body(seed_tiers, message="edit"), format="json"
        )
        assert response.status_code == 405
    assert TierConfigVersion.objects.get().message == "seed"


def test_the_broken_config_is_refused_naming_each_field(
    api: Any, operator: Any, bad_tiers: dict[str, Any]
) -> None:
    response = api(operator).post(URL, body(bad_tiers), format="json")
    assert response.status_code == 400
    errors = response.json()["config"]
    joined = "\n".join(errors)
    assert "scheduler.queues.batch.priority: must differ from" in joined
    assert "scheduler.queues.batch.max_batch_size:" in joined
    assert "scheduler.adaptive.wait_time_reduction_ratio:" in joined
    assert TierConfigVersion.objects.count() == 0
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"message": "x", "config": {}}, "name"),
        ({"name": "bad name!", "config": {}}, "name"),
        ({"name": "ok"}, "config"),
        ({"name": "ok", "config": [1, 2]}, "config"),
        ({"name": "ok", "config": {"scheduler": {"queues": {}}}}, "config"),
    ],
)
def test_other_bad_bodies_name_the_field(
    api: Any, operator: Any, data: dict[str, Any], field: str
) -> None:
    response = api(operator).post(URL, data, format="json")
    assert response.status_code == 400
    assert field in response.json()


def test_an_unknown_key_is_named_with_its_path(
    api: Any, operator: Any, seed_tiers: dict[str, Any]
) -> None:
    config = copy.deepcopy(seed_tiers)
    config["scheduler"]["queues"]["online"]["max_wait_ms"] = 3
    errors = api(operator).post(URL, body(config), format="json").json()["config"]
    assert any(e.startswith("scheduler.queues.online.max_wait_ms:") for e in errors)


def test_creating_writes_an_audit_row_with_the_json(
    api: Any, operator: Any, seed_tiers: dict[str, Any]
) -> None:
    data = api(operator).post(URL, body(seed_tiers, message="from the seed"), format="json").json()
    event = AuditEvent.objects.get()
    assert (event.action, event.actor, event.object_type, event.object_id) == (
        "create",
        operator,
        "tuning.tierconfigversion",
        str(data["id"]),
    )
    assert event.after["config"] == seed_tiers
    assert (event.after["version"], event.message, event.object_repr) == (
        1,
        "from the seed",
        "prod v1",
    )


def test_list_filters_by_name_newest_first(
    api: Any, operator: Any, seed_tiers: dict[str, Any]
) -> None:
    client = api(operator)
    for name in ("a", "b", "a"):
        client.post(URL, body(seed_tiers, name=name), format="json")
    rows = client.get(URL, {"name": "a"}).json()["results"]
    assert [(r["name"], r["version"]) for r in rows] == [("a", 2), ("a", 1)]


def test_diff_defaults_to_the_previous_version(
    api: Any, operator: Any, seed_tiers: dict[str, Any]
) -> None:
    client = api(operator)
    v1 = client.post(URL, body(seed_tiers), format="json").json()
    changed = copy.deepcopy(seed_tiers)
    changed["scheduler"]["queues"]["online"]["max_waiting_time_ms"] = 5
    v2 = client.post(URL, body(changed), format="json").json()
    diff = client.get(f"{URL}{v2['id']}/diff/").json()
    assert diff["against"] == {"id": v1["id"], "name": "prod", "version": 1}
    assert diff["version"] == {"id": v2["id"], "name": "prod", "version": 2}
    assert diff["changes"] == [
        {
            "path": "scheduler.queues.online.max_waiting_time_ms",
            "old": 10,
            "new": 5,
            "kind": "changed",
        }
    ]
    first = client.get(f"{URL}{v1['id']}/diff/").json()
    assert (first["against"], first["changes"]) == (None, [])


def test_diff_against_any_version_even_of_another_name(
    api: Any, operator: Any, viewer: Any, seed_tiers: dict[str, Any]
) -> None:
    client = api(operator)
    smaller = copy.deepcopy(seed_tiers)
    del smaller["scheduler"]["queues"]["offline"]
    a = client.post(URL, body(smaller, name="small"), format="json").json()
    b = client.post(URL, body(seed_tiers, name="full"), format="json").json()
    diff = api(viewer).get(f"{URL}{b['id']}/diff/", {"against": a["id"]}).json()
    assert [(c["path"], c["kind"]) for c in diff["changes"]] == [
        ("scheduler.queues.offline", "added")
    ]
    backwards = api(viewer).get(f"{URL}{a['id']}/diff/", {"against": b["id"]}).json()
    assert backwards["changes"][0]["kind"] == "removed"
    assert api(viewer).get(f"{URL}{a['id']}/diff/", {"against": "x"}).status_code == 400
    assert api(viewer).get(f"{URL}{a['id']}/diff/", {"against": 99999}).status_code == 404
