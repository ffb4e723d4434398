from __future__ import annotations

from typing import Any

import pytest

from console.audit.models import AuditEvent
from console.fleet import services
from console.fleet.envfile import parse_env, render_env
from console.fleet.models import Node

pytestmark = pytest.mark.django_db


def test_set_desired_changes_and_audits_only_nodes_that_differ(
    operator: Any, tier_config: Any, launch_profile: Any
) -> None:
    a, _ = services.create_node("a", [], None)
    b, _ = services.create_node("b", [], None)
    services.set_desired([a], tier_config=tier_config)
    before = AuditEvent.objects.count()
    changed = services.set_desired(
        Node.objects.all(),
        tier_config=tier_config,
        launch_profile=launch_profile,
        user=operator,
        reason="rollout 7 wave 1",
    )
    assert sorted(n.name for n in changed) == ["a", "b"]
    assert AuditEvent.objects.count() == before + 2
    event = AuditEvent.objects.filter(object_id=str(b.pk)).first()
    assert event.actor_name == "otto" and "rollout 7 wave 1" in event.message
    assert event.before == {"desired_tier_config": None, "desired_launch_profile": None}
    assert event.after == {
        "desired_tier_config": tier_config.pk,
        "desired_launch_profile": launch_profile.pk,
    }
    assert services.set_desired(Node.objects.all(), tier_config=tier_config) == []


def test_deleting_a_node_revokes_its_console_key_and_removes_its_gateway_endpoint(
    admin_user: Any,
) -> None:
    node, _ = services.create_node("gone", [], None)
    node.listen_url = "http://127.0.0.1:9109"
    endpoint = services.ensure_gateway_endpoint(node)
    assert endpoint is not None
    services.delete_node(node, admin_user)
    from console.fleet.models import Endpoint, GatewayKey

    assert not Endpoint.objects.filter(pk=endpoint.pk).exists()
    assert GatewayKey.objects.get(name="console-gone").revoked_at is not None


def test_env_parser_reads_the_seed_convention_and_quotes() -> None:
    [found] = parse_env(
        'export TAOTOKEN_BASE_URL="https://taotoken.net/api"  # channel\n'
        "TAOTOKEN_API_KEY=sk-abc\nexport TAOTOKEN_MODEL_BATCH='big one'\n"
    )
    assert (found.name, found.base_url, found.api_key, found.model_ids) == (
        "taotoken",
        "https://taotoken.net/api",
        "sk-abc",
        ["big one"],
    )
    text = render_env("my endpoint", "http://h/v1", "sk-...abcd", ["a", "b"], "b")
    assert "export MY_ENDPOINT_MODEL_DEFAULT=b" in text and "export MY_ENDPOINT_MODEL_1=a" in text
    [again] = parse_env(text)
    assert again.default_model == "b" and set(again.model_ids) == {"a", "b"}


def test_a_node_update_that_fails_half_way_changes_nothing(
    monkeypatch: pytest.MonkeyPatch, tier_config: Any
) -> None:
    node, _ = services.create_node("gpu-x-01", ["a"], None)
    events = AuditEvent.objects.count()

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("database went away")

    monkeypatch.setattr(services, "set_desired", broken)
    with pytest.raises(RuntimeError):
        services.update_node(node, None, name="gpu-x-renamed", desired_tier_config=tier_config)
    node.refresh_from_db()
    assert node.name == "gpu-x-01" and AuditEvent.objects.count() == events
