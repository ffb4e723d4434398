"""An operator unsets a node's desired version and acknowledges an apply error, from the node
page and the API, audited; the node's status (one rule, console/fleet/status.py) follows."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from console.audit.models import AuditEvent
from console.fleet import services
from console.fleet.models import Node
from tests.fleet.fleet_helpers import beat, post_beat

pytestmark = pytest.mark.django_db

ERROR = {"version": None, "error": "engine exited with code 2: unknown flag --bogus"}


def _signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def failing(node_and_token: Any, tier_config: Any) -> tuple[Node, str, Any]:
    """A node desiring a tier config version its agent refuses, and reporting so."""
    node, token = node_and_token
    services.set_desired([node], tier_config=tier_config, reason="test")
    error = {**ERROR, "version": tier_config.pk}
    assert post_beat(Client(), token, beat(apply_errors={"tier_config": error})).status_code == 200
    node.refresh_from_db()
    assert node.status() == "degraded" and node.apply_errors == {"tier_config": error}
    return node, token, error


def test_unsetting_the_desired_version_by_api_clears_it_and_is_audited(
    failing: tuple[Node, str, Any], operator: Any
) -> None:
    node, token, error = failing
    client = _signed_in(operator)
    url = f"/api/v1/nodes/{node.pk}/unset-desired/"
    r = client.post(url, {"kind": "tier_config"}, content_type="application/json")
    assert r.status_code == 200, r.content
    assert r.json()["desired_tier_config"] is None
    event = AuditEvent.objects.filter(object_id=str(node.pk)).first()
    assert event is not None and event.actor_name == operator.username
    assert event.before["desired_tier_config"] is not None
    assert event.after["desired_tier_config"] is None
    # The agent's next beat still carries the error (it has not seen the reply yet): it is
    # about a version no longer desired, so it is not stored, and the node is healthy.
    r = post_beat(Client(), token, beat(apply_errors={"tier_config": error}))
    assert r.json()["desired"]["tier_config"] is None
    node.refresh_from_db()
    assert node.apply_errors == {} and node.status() == "healthy"
    again = client.post(url, {"kind": "tier_config"}, content_type="application/json")
    assert again.status_code == 400 and "kind" in again.json()


@pytest.mark.parametrize("body", [{}, {"kind": "engine"}, {"kind": ["tier_config"]}])
def test_a_bad_kind_is_a_400_naming_it(
    failing: tuple[Node, str, Any], operator: Any, body: Any
) -> None:
    node, _, _ = failing
    client = _signed_in(operator)
    for action in ("unset-desired", "acknowledge-error"):
        r = client.post(f"/api/v1/nodes/{node.pk}/{action}/", body, content_type="application/json")
        assert r.status_code == 400 and "kind" in r.json(), r.content


def test_a_viewer_may_do_neither(failing: tuple[Node, str, Any], viewer: Any) -> None:
    node, _, _ = failing
    client = _signed_in(viewer)
    for action in ("unset-desired", "acknowledge-error"):
        r = client.post(
            f"/api/v1/nodes/{node.pk}/{action}/", {"kind": "tier_config"}, "application/json"
        )
        assert r.status_code == 403
    assert client.post(f"/fleet/nodes/{node.pk}/unset-desired/tier_config/").status_code == 403
    node.refresh_from_db()
    assert node.desired_tier_config_id is not None


def test_acknowledging_an_error_makes_the_node_healthy_until_it_fails_anew(
    failing: tuple[Node, str, Any], operator: Any
) -> None:
    node, token, error = failing
    client = _signed_in(operator)
    r = client.post(
        f"/api/v1/nodes/{node.pk}/acknowledge-error/",
        {"kind": "tier_config"},
        content_type="application/json",
    )
    assert r.status_code == 200, r.content
    assert r.json()["status"] == "healthy" and r.json()["acknowledged_errors"] == {
        "tier_config": error
    }
    assert AuditEvent.objects.filter(message="tier_config apply error acknowledged").exists()
    # Still reported: still acknowledged, still healthy.
    post_beat(Client(), token, beat(apply_errors={"tier_config": error}))
    node.refresh_from_db()
    assert node.status() == "healthy" and node.apply_errors == {"tier_config": error}
    # A different failure of the same kind shows again.
    worse = {**error, "error": "queues.online.priority: must be an integer"}
    post_beat(Client(), token, beat(apply_errors={"tier_config": worse}))
    node.refresh_from_db()
    assert node.status() == "degraded" and node.acknowledged_errors == {}


def test_the_node_page_offers_both_actions_with_a_confirmation(
    failing: tuple[Node, str, Any], operator: Any
) -> None:
    node, _, _ = failing
    client = _signed_in(operator)
    html = client.get(f"/fleet/nodes/{node.pk}/").content.decode()
    assert 'id="unset-tier_config"' in html and 'id="acknowledge-tier_config"' in html
    assert html.count("data-confirm=") >= 2
    r = client.post(f"/fleet/nodes/{node.pk}/acknowledge-error/tier_config/")
    assert r.status_code == 302
    html = client.get(f"/fleet/nodes/{node.pk}/status/").content.decode()
    assert "acknowledged" in html and 'id="acknowledge-tier_config"' not in html
    r = client.post(f"/fleet/nodes/{node.pk}/unset-desired/tier_config/")
    assert r.status_code == 302
    node.refresh_from_db()
    assert node.desired_tier_config_id is None
    assert 'id="unset-tier_config"' not in client.get(f"/fleet/nodes/{node.pk}/").content.decode()


def test_a_viewer_sees_no_action_buttons(failing: tuple[Node, str, Any], viewer: Any) -> None:
    node, _, _ = failing
    html = _signed_in(viewer).get(f"/fleet/nodes/{node.pk}/").content.decode()
    assert "unset-desired" not in html and "acknowledge-error" not in html
