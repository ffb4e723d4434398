"""The audit log records sign-ins (and failed ones) and links each object to its page."""

from __future__ import annotations

from typing import Any

from django.test import Client

from console.audit.models import AuditEvent
from console.fleet.models import Endpoint


def test_a_sign_in_and_a_failed_one_are_recorded(operator: Any) -> None:
    client = Client()
    assert (
        client.post("/accounts/login/", {"username": "otto", "password": "wrong"}).status_code
        == 200
    )
    ok = client.post("/accounts/login/", {"username": "otto", "password": "tiergate-test-pw-1"})
    assert ok.status_code == 302
    events = list(AuditEvent.objects.filter(action="login").order_by("id"))
    assert [e.message for e in events] == ["failed sign-in as 'otto'", "signed in"]
    assert events[1].actor_name == "otto" and events[1].source_ip == "127.0.0.1"
    assert events[0].actor is None
    assert "wrong" not in str([e.__dict__ for e in events])


def test_the_log_links_objects_to_their_pages_with_readable_names(
    admin_user: Any, operator: Any
) -> None:
    client = Client()
    client.force_login(admin_user)
    response = client.post(
        "/api/v1/endpoints/",
        {"name": "llm-a", "base_url": "http://127.0.0.1:9/v1", "kind": "external"},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    endpoint = Endpoint.objects.get(name="llm-a")
    reader = Client()
    reader.force_login(operator)
    page = reader.get("/audit/").content.decode()
    assert f'href="/fleet/endpoints/{endpoint.pk}/"' in page
    assert (
        "model endpoint" in page or "endpoint" in page.split(f"/fleet/endpoints/{endpoint.pk}/")[1]
    )
    assert AuditEvent(object_type="fleet.endpoint", object_id="²").object_url() is None
    assert AuditEvent(object_type="no.such", object_id="1").object_label == "no.such"


def test_time_filters_with_any_offset_are_compared_in_utc(operator: Any) -> None:
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(operator)
    far = "6705-06-29T13:50:26.196+20:46"  # an offset PostgreSQL itself refuses
    response = client.get("/api/v1/audit-events/", {"since": far})
    assert response.status_code == 200 and response.json()["results"] == []
    edge = client.get("/api/v1/audit-events/", {"until": "9999-12-31T23:59:59-23:00"})
    assert edge.status_code == 400 and "until" in edge.json()
    naive = client.get("/api/v1/audit-events/", {"since": "2000-01-01T00:00"})
    assert naive.status_code == 200
