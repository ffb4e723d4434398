from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIRequestFactory
from rest_framework.views import APIView

from console.core.roles import ADMIN, OPERATOR, VIEWER, RolePermission, has_role, role_of


class _OperatorAction(APIView):
    required_role = OPERATOR

    def get(self, request: Any) -> Any:
        from rest_framework.response import Response

        return Response({"ok": True})

    def post(self, request: Any) -> Any:
        from rest_framework.response import Response

        return Response({"done": True})


def _call(method: str, user: Any) -> int:
    factory = APIRequestFactory()
    request = getattr(factory, method)("/x/")
    if user is not None:
        from rest_framework.test import force_authenticate

        force_authenticate(request, user=user)
    return _OperatorAction.as_view(permission_classes=[RolePermission])(request).status_code


def test_viewer_reads_but_gets_403_on_an_operator_action(viewer: Any) -> None:
    assert _call("get", viewer) == 200
    assert _call("post", viewer) == 403


def test_operator_and_admin_may_act(operator: Any, admin_user: Any) -> None:
    assert _call("post", operator) == 200
    assert _call("post", admin_user) == 200


def test_user_without_role_gets_nothing(outsider: Any) -> None:
    assert _call("get", outsider) == 403


def test_anonymous_api_call_gets_401(db: None) -> None:
    r = Client().get("/api/v1/audit-events/")
    assert r.status_code == 401


def test_anonymous_page_redirects_to_login(db: None) -> None:
    r = Client().get("/")
    assert r.status_code == 302 and "/accounts/login/" in r["Location"]


def test_login_page_signs_a_user_in(viewer: Any) -> None:
    client = Client()
    assert b"Sign in" in client.get("/accounts/login/").content
    r = client.post("/accounts/login/", {"username": "vera", "password": "tiergate-test-pw-1"})
    assert r.status_code == 302
    assert client.get("/fleet/").status_code == 200


def test_pages_need_a_role_not_just_a_sign_in(outsider: Any) -> None:
    client = Client()
    client.force_login(outsider)
    for path in ("/audit/", "/fleet/", "/benchmarks/", "/tuning/tier-configs/"):
        assert client.get(path).status_code == 403, path


def test_role_hierarchy(viewer: Any, operator: Any, admin_user: Any) -> None:
    assert role_of(viewer) == VIEWER and role_of(admin_user) == ADMIN
    assert has_role(operator, VIEWER) and not has_role(operator, ADMIN)


def test_adduser_command_creates_a_user_with_a_role(db: None) -> None:
    out = StringIO()
    call_command(
        "adduser", "nina", "--role", "operator", "--password", "long-enough-pw-7", stdout=out
    )
    from django.contrib.auth import get_user_model

    nina = get_user_model().objects.get(username="nina")
    assert role_of(nina) == OPERATOR and nina.check_password("long-enough-pw-7")
    with pytest.raises(CommandError, match="username: 'nina' exists"):
        call_command("adduser", "nina", "--role", "viewer", stdout=out)


def test_adduser_refuses_a_weak_password(db: None) -> None:
    with pytest.raises(CommandError, match="--password"):
        call_command("adduser", "x", "--role", "viewer", "--password", "short")


def test_openapi_schema_builds_without_warnings(db: None) -> None:
    out = StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    assert "openapi: 3" in out.getvalue()


def test_swagger_ui_uses_only_local_assets(db: None) -> None:
    body = Client().get("/api/v1/docs/").content.decode()
    assert "/static/drf_spectacular_sidecar/" in body
    assert "cdn." not in body and "unpkg" not in body


def test_plotly_is_served_by_the_app(db: None) -> None:
    r = Client().get("/static/vendor/plotly.min.js")
    try:
        assert r.status_code == 200
        assert b"plotly" in b"".join(r.streaming_content)[:2000].lower()
    finally:
        r.close()  # the file it streams from


def test_audit_page_filters_and_rejects_bad_dates(operator: Any) -> None:
    from console.audit.services import record

    record(action="create", object_type="demo.thing", object_repr="one", user=operator)
    client = Client()
    client.force_login(operator)
    assert b"demo.thing" in client.get("/audit/?action=create").content
    assert b"not an ISO 8601" in client.get("/audit/?since=yesterday").content
    api = client.get("/api/v1/audit-events/?since=yesterday")
    assert api.status_code == 400 and "ISO 8601" in api.json()["since"][0]
    bad = client.get("/api/v1/audit-events/?action=explode")
    assert bad.status_code == 400 and "action" in bad.json()
    assert client.get("/api/v1/audit-events/?until=2026-13-45T99:00").status_code == 400


def test_only_the_current_section_is_marked_active_in_the_nav(operator: Any) -> None:
    from django.test import RequestFactory

    from console.core.context import navigation

    request = RequestFactory().get("/audit/")
    request.user = operator
    items = navigation(request)["nav_items"]
    active = [label for label, _url, is_active in items if is_active]
    assert active == ["Audit"]
