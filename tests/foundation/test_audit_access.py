"""Who reads the audit log (docs/architecture.md#security-and-reliability): operators and admins, in
pages and API; viewers, users without a role and anonymous callers do not, and viewers are not
offered the link."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from console.accounts.services import create_token
from console.audit.services import record


@pytest.fixture
def event(db: None) -> None:
    record(action="create", object_type="demo.thing", object_repr="secretive", message="m")


def _signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_it_rejects_a_viewer_in_page_and_api(event: None, viewer: Any) -> None:
    client = _signed_in(viewer)
    assert client.get("/audit/").status_code == 403
    assert client.get("/api/v1/audit-events/").status_code == 403
    _, key = create_token(viewer, "audit-test")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    r = api.get("/api/v1/audit-events/")
    assert r.status_code == 403 and b"secretive" not in r.content


def test_it_hides_the_audit_link_from_a_viewer(viewer: Any, operator: Any) -> None:
    assert b'href="/audit/"' not in _signed_in(viewer).get("/fleet/").content
    assert b'href="/audit/"' in _signed_in(operator).get("/fleet/").content


@pytest.mark.parametrize("who", ["operator", "admin_user"])
def test_operators_and_admins_read_it(event: None, who: str, request: Any) -> None:
    user = request.getfixturevalue(who)
    client = _signed_in(user)
    assert b"secretive" in client.get("/audit/").content
    _, key = create_token(user, "audit-test")
    r = Client(HTTP_AUTHORIZATION=f"Bearer {key}").get("/api/v1/audit-events/")
    assert r.status_code == 200
    assert "secretive" in [e["object_repr"] for e in r.json()["results"]]


def test_it_rejects_users_without_a_role_and_anonymous_callers(event: None, outsider: Any) -> None:
    assert _signed_in(outsider).get("/api/v1/audit-events/").status_code == 403
    assert Client().get("/api/v1/audit-events/").status_code == 401
