from __future__ import annotations

import json
import time
from typing import Any

import pytest
from django.test import Client

from console.fleet import gateway_keys, services
from console.fleet.models import Endpoint, GatewayKey, Node, TelemetrySample
from tests.fleet.fleet_helpers import beat, post_beat, sample

pytestmark = pytest.mark.django_db


def test_a_missing_or_unknown_token_gets_401(node_and_token: Any) -> None:
    client = Client()
    assert post_beat(client, None, beat()).status_code == 401
    r = post_beat(client, "tgn_not-a-real-token", beat())
    assert r.status_code == 401
    assert r["WWW-Authenticate"] == "Bearer"
    assert TelemetrySample.objects.count() == 0


def test_a_token_cannot_post_for_another_node(node_and_token: Any) -> None:
    node, token = node_and_token
    other, _ = services.create_node("gpu-b-02", [], None)
    r = post_beat(Client(), token, beat(node=other.name))
    assert r.status_code == 403
    assert post_beat(Client(), token, beat(node=other.pk)).status_code == 403
    assert TelemetrySample.objects.count() == 0
    assert post_beat(Client(), token, beat(node=node.name)).status_code == 200


def test_a_user_session_is_not_a_node_token(node_and_token: Any, admin_user: Any) -> None:
    client = Client()
    client.force_login(admin_user)
    assert post_beat(client, None, beat()).status_code == 401


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"mode": "sideways"}, "mode"),
        ({"samples": [{**sample(), "ts": "yesterday"}]}, "samples.0.ts"),
        ({"samples": [sample(), {**sample(), "gpu_source": "magic"}]}, "samples.1.gpu_source"),
        ({"applied": {"tier_config": "3"}}, "applied.tier_config"),
        ({"samples": [sample(online={"depth": "two"})]}, "samples.0.tiers.online.depth"),
    ],
)
def test_wrong_types_get_400_naming_the_field(
    node_and_token: Any, body: dict[str, Any], field: str
) -> None:
    _, token = node_and_token
    r = post_beat(Client(), token, beat(**body))
    assert r.status_code == 400
    assert field in r.json(), r.json()


@pytest.mark.parametrize(
    "url", ["0000", "ftp://gpu-a-01:9100", "http://", "http://[::1", "http://a b"]
)
def test_a_listen_url_the_console_cannot_use_gets_400_and_changes_nothing(
    node_and_token: Any, url: str
) -> None:
    """The console makes the node's gateway endpoint from this URL: a bad one was a 500."""
    node, token = node_and_token
    r = post_beat(Client(), token, beat(listen_url=url, samples=[sample()]))
    assert r.status_code == 400
    assert "listen_url" in r.json(), r.json()
    node.refresh_from_db()
    assert node.listen_url == "" and node.last_seen_at is None
    assert not Endpoint.objects.filter(node=node).exists()
    assert TelemetrySample.objects.count() == 0


def test_a_missing_required_field_and_bad_json_get_400(node_and_token: Any) -> None:
    _, token = node_and_token
    body = beat()
    del body["mode"]
    r = post_beat(Client(), token, body)
    assert r.status_code == 400 and "mode" in r.json()
    assert post_beat(Client(), token, "{not json").status_code == 400


def test_unknown_keys_are_ignored(node_and_token: Any) -> None:
    _, token = node_and_token
    assert post_beat(Client(), token, beat(future_field={"x": 1})).status_code == 200


def test_it_stores_samples_and_node_state(node_and_token: Any) -> None:
    node, token = node_and_token
    now = time.time()
    body = beat(
        listen_url="",
        samples=[sample(now - 1), sample(now)],
        apply_errors={"gateway_keys": {"version": "ab12", "error": "bad key list"}},
    )
    r = post_beat(Client(), token, body)
    assert r.status_code == 200, r.content
    rows = list(TelemetrySample.objects.filter(node=node).order_by("ts"))
    assert len(rows) == 2
    assert rows[1].gpu_util == pytest.approx(0.5)
    assert rows[1].kv_cache_usage == pytest.approx(0.25)
    assert rows[1].queue_depth == 2 and rows[1].finished == 4
    assert rows[1].ttft_p99_online_s == pytest.approx(0.31)
    node.refresh_from_db()
    assert node.last_seen_at is not None and node.mode == "attached"
    assert node.health["engine"] == "ok"
    assert node.apply_errors["gateway_keys"]["version"] == "ab12"
    assert node.last_sample["gpu_util"] == pytest.approx(0.5)
    assert node.is_simulated


def test_a_resent_sample_is_stored_once(node_and_token: Any) -> None:
    _, token = node_and_token
    body = beat(samples=[sample(1795000000.0)])
    assert post_beat(Client(), token, body).status_code == 200
    assert post_beat(Client(), token, body).status_code == 200
    assert TelemetrySample.objects.count() == 1


def test_desired_content_only_when_it_differs_from_applied(
    node_and_token: Any, tier_config: Any, launch_profile: Any
) -> None:
    node, token = node_and_token
    reply = post_beat(Client(), token, beat()).json()
    assert reply["desired"] == {"tier_config": None, "launch_profile": None}
    assert reply["node"] == {"id": node.pk, "name": node.name}

    services.set_desired(
        [node], tier_config=tier_config, launch_profile=launch_profile, reason="test"
    )
    reply = post_beat(Client(), token, beat()).json()
    assert reply["desired"]["tier_config"]["id"] == tier_config.pk
    assert (
        reply["desired"]["tier_config"]["config"]["scheduler"]["queues"]["online"]["priority"] == 1
    )
    profile = reply["desired"]["launch_profile"]
    assert profile["args"]["model"] == "demo-8b"
    assert profile["argv"][:3] == ["vllm", "serve", "demo-8b"]

    applied = {"tier_config": tier_config.pk, "launch_profile": launch_profile.pk}
    reply = post_beat(Client(), token, beat(applied=applied)).json()
    assert reply["desired"] == {
        "tier_config": {"id": tier_config.pk},
        "launch_profile": {"id": launch_profile.pk},
    }
    node.refresh_from_db()
    assert node.applied_tier_config_id == tier_config.pk
    assert not node.tier_config_drift


def test_a_stored_profile_a_later_rule_rejects_still_renders_its_argv(
    node_and_token: Any, launch_profile: Any
) -> None:
    # Stored versions are rendered by type alone (as every page does): a cross-field rule that
    # the stored args break must not leave the agent without an argv to start.
    from console.tuning.models import LaunchProfileVersion

    node, token = node_and_token
    args = {**launch_profile.args, "max_num_seqs": 512, "max_num_batched_tokens": 256}
    old = LaunchProfileVersion.objects.create(name="legacy", version=1, args=args)
    services.set_desired([node], launch_profile=old, reason="test")
    profile = post_beat(Client(), token, beat()).json()["desired"]["launch_profile"]
    assert profile["argv"] == old.argv()
    assert "--max-num-batched-tokens" in profile["argv"]


def test_an_unknown_applied_version_is_stored_as_none(node_and_token: Any) -> None:
    node, token = node_and_token
    assert post_beat(Client(), token, beat(applied={"tier_config": 99999})).status_code == 200
    node.refresh_from_db()
    assert node.applied_tier_config_id is None


def test_keys_only_when_keys_version_changes(node_and_token: Any, admin_user: Any) -> None:
    _, token = node_and_token
    key, plaintext = gateway_keys.create_gateway_key(
        "ops", ["online", "batch"], "online", admin_user
    )
    reply = post_beat(Client(), token, beat()).json()
    assert reply["gateway_keys"] == [key.wire()]
    version = reply["keys_version"]
    assert plaintext not in json.dumps(reply)

    reply = post_beat(Client(), token, beat(keys_version=version)).json()
    assert "gateway_keys" not in reply and reply["keys_version"] == version

    gateway_keys.revoke_gateway_key(key, admin_user)
    reply = post_beat(Client(), token, beat(keys_version=version)).json()
    assert reply["gateway_keys"] == [] and reply["keys_version"] != version


def test_a_key_scoped_to_another_node_is_not_sent(node_and_token: Any, admin_user: Any) -> None:
    _, token = node_and_token
    other, _ = services.create_node("gpu-b-02", [], None)
    gateway_keys.create_gateway_key("b-only", ["online"], "online", admin_user, nodes=[other])
    reply = post_beat(Client(), token, beat()).json()
    assert [k["name"] for k in reply["gateway_keys"]] == []


def test_first_beat_with_a_listen_url_creates_the_nodes_gateway_endpoint(
    node_and_token: Any,
) -> None:
    node, token = node_and_token
    reply = post_beat(Client(), token, beat(listen_url="http://127.0.0.1:9101")).json()
    endpoint = Endpoint.objects.get(node=node)
    assert endpoint.kind == "gateway" and endpoint.base_url == "http://127.0.0.1:9101/v1"
    plaintext = endpoint.get_api_key()
    assert plaintext.startswith("tgk_")
    key = GatewayKey.objects.get(name=f"console-{node.name}")
    assert not key.all_nodes and list(key.nodes.all()) == [node]
    assert set(key.tiers) == {"online", "batch", "offline"}
    assert key.wire() in reply["gateway_keys"]
    # The same URL again changes nothing; a moved gateway repoints the endpoint.
    post_beat(Client(), token, beat(listen_url="http://127.0.0.1:9101"))
    assert Endpoint.objects.filter(node=node).count() == 1
    post_beat(Client(), token, beat(listen_url="http://10.0.0.5:9101"))
    endpoint.refresh_from_db()
    assert endpoint.base_url == "http://10.0.0.5:9101/v1"
    assert endpoint.get_api_key() == plaintext


def test_the_body_limit_is_one_mebibyte(node_and_token: Any) -> None:
    _, token = node_and_token
    body = beat(agent_version="x", padding="y" * (1024 * 1024))
    assert post_beat(Client(), token, body).status_code == 413


def test_too_many_samples_are_refused(node_and_token: Any) -> None:
    _, token = node_and_token
    r = post_beat(Client(), token, beat(samples=[sample(1795000000.0 + i) for i in range(601)]))
    assert r.status_code == 400 and "samples" in r.json()


def test_node_ordering_of_queries_is_bounded(
    node_and_token: Any, django_assert_max_num_queries: Any
) -> None:
    """The hot path: auth, keys, one insert, one update (plus transaction statements)."""
    node, token = node_and_token
    post_beat(Client(), token, beat())  # first beat may do one-off work
    Node.objects.filter(pk=node.pk).update(listen_url="")
    with django_assert_max_num_queries(8):
        assert (
            post_beat(
                Client(), token, beat(samples=[sample(1795000000.0 + i) for i in range(60)])
            ).status_code
            == 200
        )


def test_the_beats_key_query_matches_the_orm_definition(
    node_and_token: Any, admin_user: Any
) -> None:
    from console.fleet.heartbeat import keys_for_node

    node, _ = node_and_token
    other, _ = services.create_node("gpu-b-02", [], None)
    gateway_keys.create_gateway_key("everywhere", ["online"], "online", admin_user)
    gateway_keys.create_gateway_key("here", ["batch"], "batch", admin_user, nodes=[node, other])
    gateway_keys.create_gateway_key("there", ["offline"], "offline", admin_user, nodes=[other])
    revoked, _ = gateway_keys.create_gateway_key("old", ["online"], "online", admin_user)
    gateway_keys.revoke_gateway_key(revoked, admin_user)
    for n in (node, other):
        expected = [k.wire() for k in GatewayKey.objects.for_node(n).order_by("sha256")]
        assert keys_for_node(n) == expected
    assert sorted(k["name"] for k in keys_for_node(node)) == ["everywhere", "here"]
