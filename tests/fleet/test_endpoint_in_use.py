"""An endpoint benchmark runs refer to cannot be deleted: a 409 (API) or a message (page) that
says why, nothing written; found by schemathesis as a 500."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from console.audit.models import AuditEvent
from console.fleet import services
from console.fleet.models import Endpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def used(admin_user: Any) -> Endpoint:
    from console.bench.services import create_run

    endpoint = services.create_endpoint(
        admin_user, name="used", base_url="http://127.0.0.1:9/v1", models=["m"], kind="vllm"
    )
    create_run(endpoint=endpoint, workload={"requests": 1}, user=admin_user, enqueue=False)
    return endpoint


def test_the_api_answers_409_and_keeps_it(used: Endpoint, admin_user: Any) -> None:
    client = Client()
    client.force_login(admin_user)
    deletes = AuditEvent.objects.filter(action="delete").count()
    r = client.delete(f"/api/v1/endpoints/{used.pk}/")
    assert r.status_code == 409 and "1 benchmark run(s)" in r.json()["endpoint"][0]
    assert Endpoint.objects.filter(pk=used.pk).exists()
    assert AuditEvent.objects.filter(action="delete").count() == deletes


def test_the_page_says_why(used: Endpoint, admin_user: Any) -> None:
    client = Client()
    client.force_login(admin_user)
    r = client.post(f"/fleet/endpoints/{used.pk}/delete/", follow=True)
    assert r.status_code == 200 and "cannot be deleted" in r.content.decode()
    assert Endpoint.objects.filter(pk=used.pk).exists()
