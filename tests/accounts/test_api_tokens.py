"""API tokens: created once, hashed at rest, usable with the owner's role, revocable, audited."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from console.accounts.models import ApiToken
from console.audit.models import AuditEvent


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_a_viewer_creates_a_token_shown_once_and_stored_hashed(viewer: Any, api: Any) -> None:
    response = api(viewer).post("/api/v1/api-tokens/", {"name": "ci-nightly"}, format="json")
    assert response.status_code == 201, response.content
    plaintext = response.json()["token"]
    assert plaintext.startswith("tgt_") and len(plaintext) > 40
    stored = ApiToken.objects.get(name="ci-nightly")
    assert plaintext not in (stored.sha256, stored.prefix)
    assert stored.sha256 != plaintext and len(stored.sha256) == 64
    listed = api(viewer).get("/api/v1/api-tokens/").json()["results"]
    assert [t["name"] for t in listed] == ["ci-nightly"]
    assert "token" not in listed[0] and plaintext not in str(listed)
    assert AuditEvent.objects.filter(action="create", object_type="accounts.apitoken").count() == 1


def test_the_token_acts_with_its_owners_role(viewer: Any, operator: Any, api: Any) -> None:
    token = api(viewer).post("/api/v1/api-tokens/", {"name": "ro"}, format="json").json()["token"]
    client = bearer(token)
    assert client.get("/api/v1/nodes/").status_code == 200
    # A viewer's token cannot write what a viewer cannot.
    assert client.post("/api/v1/tier-configs/", {}, format="json").status_code == 403
    # DRF's keyword works too.
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert other.get("/api/v1/nodes/").status_code == 200


def test_last_used_is_recorded_at_most_once_a_minute(viewer: Any, api: Any) -> None:
    token = api(viewer).post("/api/v1/api-tokens/", {"name": "t"}, format="json").json()["token"]
    assert ApiToken.objects.get().last_used_at is None
    bearer(token).get("/api/v1/nodes/")
    first = ApiToken.objects.get().last_used_at
    assert first is not None
    bearer(token).get("/api/v1/nodes/")
    assert ApiToken.objects.get().last_used_at == first
    ApiToken.objects.update(last_used_at=first - timedelta(minutes=5))
    bearer(token).get("/api/v1/nodes/")
    assert ApiToken.objects.get().last_used_at > first - timedelta(minutes=1)


def test_a_revoked_or_unknown_token_gets_401_with_a_challenge(viewer: Any, api: Any) -> None:
    created = api(viewer).post("/api/v1/api-tokens/", {"name": "t"}, format="json").json()
    response = api(viewer).post(f"/api/v1/api-tokens/{created['id']}/revoke/")
    assert response.status_code == 200 and response.json()["active"] is False
    refused = bearer(created["token"]).get("/api/v1/nodes/")
    assert refused.status_code == 401
    assert refused["WWW-Authenticate"].startswith("Bearer")
    assert bearer("tgt_" + "x" * 43).get("/api/v1/nodes/").status_code == 401
    assert AuditEvent.objects.filter(action="delete", object_type="accounts.apitoken").count() == 1


def test_only_the_owner_or_an_admin_revokes(
    viewer: Any, operator: Any, admin_user: Any, api: Any
) -> None:
    created = api(viewer).post("/api/v1/api-tokens/", {"name": "t"}, format="json").json()
    # Another user does not even see it.
    assert api(operator).post(f"/api/v1/api-tokens/{created['id']}/revoke/").status_code == 404
    assert bearer(created["token"]).get("/api/v1/nodes/").status_code == 200
    admin_view = api(admin_user).get("/api/v1/api-tokens/").json()["results"]
    assert [(t["name"], t["user"]) for t in admin_view] == [("t", "vera")]
    assert api(admin_user).post(f"/api/v1/api-tokens/{created['id']}/revoke/").status_code == 200
    assert bearer(created["token"]).get("/api/v1/nodes/").status_code == 401
    event = AuditEvent.objects.get(action="delete", object_type="accounts.apitoken")
    assert event.actor_name == "ada" and event.after["user"] == "vera"


def test_bad_names_are_a_400_naming_the_field(viewer: Any, api: Any) -> None:
    client = api(viewer)
    for bad in ["", "has space", "x" * 101, 7, "-lead"]:
        response = client.post("/api/v1/api-tokens/", {"name": bad}, format="json")
        assert response.status_code == 400, bad
        assert "name" in response.json()
    assert client.post("/api/v1/api-tokens/", {"name": "dup"}, format="json").status_code == 201
    again = client.post("/api/v1/api-tokens/", {"name": "dup"}, format="json")
    assert again.status_code == 400 and "already" in str(again.json()["name"])
    assert ApiToken.objects.count() == 1


def test_a_user_without_a_role_gets_no_token(outsider: Any, api: Any) -> None:
    assert (
        api(outsider).post("/api/v1/api-tokens/", {"name": "t"}, format="json").status_code == 403
    )
    assert ApiToken.objects.count() == 0


def test_the_page_creates_shows_once_and_revokes(viewer: Any) -> None:
    client = Client()
    client.force_login(viewer)
    page = client.post("/accounts/tokens/", {"name": "laptop"})
    assert page.status_code == 200
    plaintext = page.context["created"][1]
    assert plaintext in page.content.decode()
    again = client.get("/accounts/tokens/").content.decode()
    assert plaintext not in again and "laptop" in again and "never" in again
    bad = client.post("/accounts/tokens/", {"name": "no spaces allowed"})
    assert bad.status_code == 400 and "name:" in bad.content.decode()
    token = ApiToken.objects.get(name="laptop")
    assert client.post(f"/accounts/tokens/{token.pk}/revoke/").status_code == 302
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None


def test_the_page_refuses_revoking_someone_elses_token(viewer: Any, operator: Any) -> None:
    token = ApiToken.objects.create(user=viewer, name="v", sha256="0" * 64, prefix="tgt_0000")
    client = Client()
    client.force_login(operator)
    assert client.post(f"/accounts/tokens/{token.pk}/revoke/").status_code == 403
    assert "tgt_0000" not in client.get("/accounts/tokens/").content.decode()
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None


def test_the_management_command_prints_a_working_token(operator: Any, capsys: Any) -> None:
    call_command("create_api_token", "otto", "ci")
    plaintext = capsys.readouterr().out.strip()
    assert bearer(plaintext).get("/api/v1/rollouts/").status_code == 200
    assert ApiToken.objects.get().created_at <= timezone.now()


def test_the_schema_documents_the_bearer_scheme(db: None) -> None:
    schema = Client().get("/api/v1/schema/", HTTP_ACCEPT="application/json").content.decode()
    assert "apiToken" in schema and "create_api_token" in schema
