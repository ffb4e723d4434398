"""CRUD and the permission matrix of /api/v1/endpoints/, nodes/ and gateway-keys/."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from console.audit.models import AuditEvent
from console.fleet.crypto import sha256_hex
from console.fleet.models import Endpoint, GatewayKey, Node
from tests.fleet.fake_upstream import GOOD_KEY, serve
from tests.fleet.fleet_helpers import SEED_TIERS

pytestmark = pytest.mark.django_db

SECRET = "sk-test-PLAINTEXT-abcd1234"


@pytest.fixture
def users(viewer: Any, operator: Any, admin_user: Any, outsider: Any) -> dict[str, Any]:
    return {
        "anonymous": None,
        "outsider": outsider,
        "viewer": viewer,
        "operator": operator,
        "admin": admin_user,
    }


@pytest.fixture
def endpoint(db: None) -> Endpoint:
    from console.fleet import services

    return services.create_endpoint(
        None,
        name="taotoken",
        base_url="https://taotoken.net/api",
        api_key=SECRET,
        models=["m-online"],
        default_model="m-online",
    )


READ_EXPECTED = {"anonymous": 401, "outsider": 403, "viewer": 200, "operator": 200, "admin": 200}
WRITE_EXPECTED = {"anonymous": 401, "outsider": 403, "viewer": 403, "operator": 403}


@pytest.mark.parametrize("who", list(READ_EXPECTED))
@pytest.mark.parametrize("route", ["endpoints", "nodes", "gateway-keys"])
def test_reads_need_viewer(api: Any, users: dict[str, Any], who: str, route: str) -> None:
    assert api(users[who]).get(f"/api/v1/{route}/").status_code == READ_EXPECTED[who]


@pytest.mark.parametrize("who", list(WRITE_EXPECTED))
def test_writes_need_admin(
    api: Any, users: dict[str, Any], who: str, endpoint: Endpoint, node_and_token: Any
) -> None:
    node, _ = node_and_token
    client, code = api(users[who]), WRITE_EXPECTED[who]
    assert (
        client.post(
            "/api/v1/endpoints/", {"name": "x", "base_url": "http://h/v1"}, format="json"
        ).status_code
        == code
    )
    assert (
        client.patch(f"/api/v1/endpoints/{endpoint.pk}/", {"name": "y"}, format="json").status_code
        == code
    )
    assert client.delete(f"/api/v1/endpoints/{endpoint.pk}/").status_code == code
    assert client.post(f"/api/v1/endpoints/{endpoint.pk}/fetch-models/").status_code == code
    assert (
        client.post(
            "/api/v1/endpoints/import-env/", {"text": "X_BASE_URL=http://h"}, format="json"
        ).status_code
        == code
    )
    assert client.post("/api/v1/nodes/", {"name": "n"}, format="json").status_code == code
    assert client.post(f"/api/v1/nodes/{node.pk}/rotate-token/").status_code == code
    assert client.delete(f"/api/v1/nodes/{node.pk}/").status_code == code
    assert (
        client.post(
            "/api/v1/gateway-keys/",
            {"name": "k", "tiers": ["online"], "default_tier": "online"},
            format="json",
        ).status_code
        == code
    )
    assert (
        Endpoint.objects.filter(name="taotoken").exists()
        and Node.objects.filter(pk=node.pk).exists()
    )


def test_viewers_cannot_run_the_doctor_but_operators_may(
    api: Any, viewer: Any, endpoint: Endpoint
) -> None:
    assert api(viewer).post(f"/api/v1/endpoints/{endpoint.pk}/doctor/").status_code == 403


def test_endpoint_crud_keeps_the_key_write_only(api: Any, admin_user: Any) -> None:
    client = api(admin_user)
    r = client.post(
        "/api/v1/endpoints/",
        {
            "name": "vllm-a",
            "base_url": "http://10.0.0.1:8000/v1",
            "api_key": SECRET,
            "kind": "vllm",
            "models": ["a", "b"],
            "default_model": "a",
        },
        format="json",
    )
    assert r.status_code == 201, r.content
    body = r.json()
    assert "api_key" not in body and body["api_key_masked"] == "sk-...1234"
    assert body["url"].endswith(f"/api/v1/endpoints/{body['id']}/") and body["display"] == "vllm-a"
    endpoint = Endpoint.objects.get(pk=body["id"])
    assert endpoint.get_api_key() == SECRET and SECRET not in endpoint.api_key_encrypted

    r = client.patch(
        f"/api/v1/endpoints/{endpoint.pk}/", {"base_url": "http://10.0.0.2:8000/v1"}, format="json"
    )
    assert r.status_code == 200 and r.json()["api_key_masked"] == "sk-...1234"  # key kept
    r = client.patch(
        f"/api/v1/endpoints/{endpoint.pk}/", {"api_key": "sk-new-key-0000zzzz"}, format="json"
    )
    assert r.json()["api_key_masked"] == "sk-...zzzz"
    assert client.delete(f"/api/v1/endpoints/{endpoint.pk}/").status_code == 204
    actions = list(
        AuditEvent.objects.filter(object_type="fleet.endpoint").values_list("action", flat=True)
    )
    assert sorted(actions) == ["create", "delete", "update", "update"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"base_url": "http://h/v1"}, "name"),
        ({"name": "x", "base_url": "not a url"}, "base_url"),
        ({"name": "x", "base_url": "http://h/v1", "kind": "satellite"}, "kind"),
        ({"name": "x", "base_url": "http://h/v1", "models": "a,b"}, "models"),
    ],
)
def test_endpoint_validation_names_the_field(
    api: Any, admin_user: Any, body: dict[str, Any], field: str
) -> None:
    r = api(admin_user).post("/api/v1/endpoints/", body, format="json")
    assert r.status_code == 400 and field in r.json(), r.content


def test_a_node_belongs_only_to_a_gateway_endpoint(
    api: Any, admin_user: Any, node_and_token: Any
) -> None:
    node, _ = node_and_token
    r = api(admin_user).post(
        "/api/v1/endpoints/",
        {"name": "x", "base_url": "http://h/v1", "kind": "external", "node": node.pk},
        format="json",
    )
    assert r.status_code == 400 and "node" in r.json()


def test_env_import_and_masked_export(api: Any, admin_user: Any) -> None:
    text = (
        "# unified access\nexport TAOTOKEN_BASE_URL=https://taotoken.net/api\n"
        f"export TAOTOKEN_API_KEY='{SECRET}'\nexport TAOTOKEN_MODEL_ONLINE=fast-model\n"
        "export TAOTOKEN_MODEL_BATCH=big-model\nexport UNRELATED=1\n"
    )
    r = api(admin_user).post("/api/v1/endpoints/import-env/", {"text": text}, format="json")
    assert r.status_code == 201, r.content
    assert SECRET not in r.content.decode()
    [created] = r.json()
    assert created["name"] == "taotoken" and created["default_model"] == "fast-model"
    assert created["models"] == ["fast-model", "big-model"]
    endpoint = Endpoint.objects.get(name="taotoken")
    assert endpoint.get_api_key() == SECRET

    export = api(admin_user).get(f"/api/v1/endpoints/{endpoint.pk}/env/").json()["text"]
    assert "export TAOTOKEN_BASE_URL=https://taotoken.net/api" in export
    assert "export TAOTOKEN_API_KEY=sk-...1234" in export and SECRET not in export
    assert "TAOTOKEN_MODEL_DEFAULT=fast-model" in export and "TAOTOKEN_MODEL_1=big-model" in export

    # Importing again updates by name instead of failing.
    r = api(admin_user).post(
        "/api/v1/endpoints/import-env/", {"text": text.replace("big-model", "huge")}, format="json"
    )
    assert r.status_code == 201 and Endpoint.objects.count() == 1
    assert Endpoint.objects.get().models == ["fast-model", "huge"]


def test_env_import_without_an_endpoint_names_the_text_field(api: Any, admin_user: Any) -> None:
    r = api(admin_user).post(
        "/api/v1/endpoints/import-env/", {"text": "export FOO=1\n"}, format="json"
    )
    assert r.status_code == 400 and "text" in r.json()


def test_env_import_refuses_a_bad_base_url_and_stores_nothing(api: Any, admin_user: Any) -> None:
    text = (
        "export GOOD_BASE_URL=https://good.example/v1\nexport GOOD_API_KEY=k1\n"
        "export BAD_BASE_URL=ftp://files.example\nexport BAD_API_KEY=k2\n"
    )
    r = api(admin_user).post("/api/v1/endpoints/import-env/", {"text": text}, format="json")
    assert r.status_code == 400, r.content
    message = r.json()["text"][0]
    assert message.startswith("bad: 'ftp://files.example'") and "http://" in message
    assert Endpoint.objects.count() == 0  # the good entry was rolled back with the bad one
    r = api(admin_user).post(
        "/api/v1/endpoints/import-env/", {"text": "export X_BASE_URL=not a url\n"}, format="json"
    )
    assert r.status_code == 400 and Endpoint.objects.count() == 0


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    yield from serve()


def test_fetch_models_and_doctor_through_the_api(
    api: Any, admin_user: Any, operator: Any, upstream: str
) -> None:
    from console.fleet import services

    endpoint = services.create_endpoint(
        None, name="fake", base_url=f"{upstream}/good/v1", api_key=GOOD_KEY
    )
    r = api(admin_user).post(f"/api/v1/endpoints/{endpoint.pk}/fetch-models/")
    assert r.status_code == 200 and r.json()["models"] == ["demo-8b", "demo-70b"]
    assert r.json()["default_model"] == "demo-8b"
    r = api(operator).post(f"/api/v1/endpoints/{endpoint.pk}/doctor/")
    assert r.status_code == 200 and r.json()["ok"] is True
    assert GOOD_KEY not in r.content.decode()

    services.update_endpoint(endpoint, None, api_key="sk-wrong-key-000000")
    r = api(admin_user).post(f"/api/v1/endpoints/{endpoint.pk}/fetch-models/")
    assert r.status_code == 502 and "401" in r.json()["steps"][0]["detail"]


def test_node_create_shows_the_token_once_with_the_agent_commands(
    api: Any, admin_user: Any
) -> None:
    r = api(admin_user).post(
        "/api/v1/nodes/", {"name": "gpu-c-03", "labels": "h200, zone-a"}, format="json"
    )
    assert r.status_code == 201, r.content
    body = r.json()
    token = body["token"]
    assert token.startswith("tgn_") and len(token) == 4 + 43
    assert body["labels"] == ["h200", "zone-a"] and body["status"] == "new"
    assert f"--node-token {token}" in body["commands"]["attached"]
    assert (
        "--engine-url http://127.0.0.1:8001 --listen 0.0.0.0:9100" in body["commands"]["attached"]
    )
    assert "--console http://testserver" in body["commands"]["attached"]
    assert "--engine-cmd" in body["commands"]["managed"]
    node = Node.objects.get(name="gpu-c-03")
    assert node.token_sha256 == sha256_hex(token)
    detail = api(admin_user).get(f"/api/v1/nodes/{node.pk}/").content.decode()
    assert token not in detail and node.token_sha256 not in detail


def test_node_validation_names_the_field(api: Any, admin_user: Any, node_and_token: Any) -> None:
    client = api(admin_user)
    assert "name" in client.post("/api/v1/nodes/", {"name": "has space"}, format="json").json()
    assert "name" in client.post("/api/v1/nodes/", {"name": "gpu-a-01"}, format="json").json()
    assert (
        "labels" in client.post("/api/v1/nodes/", {"name": "ok", "labels": 5}, format="json").json()
    )


def test_rotating_a_token_locks_out_the_old_one(
    api: Any, admin_user: Any, node_and_token: Any
) -> None:
    node, old = node_and_token
    r = api(admin_user).post(f"/api/v1/nodes/{node.pk}/rotate-token/")
    new = r.json()["token"]
    assert new != old and new.startswith("tgn_")
    node.refresh_from_db()
    assert node.token_sha256 == sha256_hex(new)


def test_admin_sets_desired_versions_and_deletes_a_node(
    api: Any, admin_user: Any, node_and_token: Any, tier_config: Any
) -> None:
    node, _ = node_and_token
    r = api(admin_user).patch(
        f"/api/v1/nodes/{node.pk}/", {"desired_tier_config": tier_config.pk}, format="json"
    )
    assert r.status_code == 200 and r.json()["desired_tier_config"] == tier_config.pk
    assert AuditEvent.objects.filter(
        object_type="fleet.node", message__startswith="desired"
    ).exists()
    r = api(admin_user).patch(
        f"/api/v1/nodes/{node.pk}/", {"desired_tier_config": None}, format="json"
    )
    assert r.status_code == 200 and r.json()["desired_tier_config"] is None
    assert api(admin_user).delete(f"/api/v1/nodes/{node.pk}/").status_code == 204
    assert not Node.objects.exists()


def test_gateway_key_is_shown_once_and_stored_hashed(
    api: Any, admin_user: Any, node_and_token: Any
) -> None:
    node, _ = node_and_token
    r = api(admin_user).post(
        "/api/v1/gateway-keys/",
        {"name": "ops", "tiers": ["online", "batch"], "default_tier": "batch", "nodes": [node.pk]},
        format="json",
    )
    assert r.status_code == 201, r.content
    key = r.json()["key"]
    assert (
        key.startswith("tgk_") and r.json()["prefix"] == key[:8] and r.json()["all_nodes"] is False
    )
    stored = GatewayKey.objects.get(name="ops")
    assert stored.sha256 == sha256_hex(key)
    listing = api(admin_user).get("/api/v1/gateway-keys/").content.decode()
    assert key not in listing
    r = api(admin_user).post(f"/api/v1/gateway-keys/{stored.pk}/revoke/")
    assert r.status_code == 200 and r.json()["is_active"] is False


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "k", "tiers": ["online"], "default_tier": "batch"}, "default_tier"),
        ({"name": "k", "tiers": ["gold"], "default_tier": "gold"}, "tiers"),
        ({"name": "k", "tiers": [], "default_tier": "online"}, "tiers"),
        ({"tiers": ["online"], "default_tier": "online"}, "name"),
    ],
)
def test_gateway_key_validation_names_the_field(
    api: Any, admin_user: Any, body: dict[str, Any], field: str
) -> None:
    r = api(admin_user).post("/api/v1/gateway-keys/", body, format="json")
    assert r.status_code == 400 and field in r.json(), r.content


def test_a_tier_of_a_desired_config_is_allowed(
    api: Any, admin_user: Any, node_and_token: Any
) -> None:
    from console.fleet import services
    from console.tuning.services import create_tier_config

    node, _ = node_and_token
    config = copy.deepcopy(SEED_TIERS)
    config["scheduler"]["queues"]["gold"] = {
        "max_batch_size": 4,
        "max_waiting_time_ms": 5,
        "max_tokens_per_batch": 2048,
        "priority": 0,
    }
    services.set_desired([node], tier_config=create_tier_config(name="gold", config=config))
    r = api(admin_user).post(
        "/api/v1/gateway-keys/",
        {"name": "vip", "tiers": ["gold", "online"], "default_tier": "gold"},
        format="json",
    )
    assert r.status_code == 201, r.content
