from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from console.core.tasks import ping


@pytest.mark.django_db
def test_healthz_json_reports_database_and_broker() -> None:
    r = Client().get("/healthz?worker=0", HTTP_ACCEPT="application/json")
    assert r.status_code == 200
    checks = r.json()["checks"]
    assert checks["database"]["ok"] is True
    assert checks["broker"]["ok"] is True
    assert "worker" not in checks


@pytest.mark.django_db
def test_healthz_html_is_a_page_for_people() -> None:
    r = Client().get("/healthz?worker=0")
    assert r.status_code == 200
    assert r["Content-Type"].startswith("text/html")
    assert b"<table" in r.content and b"database" in r.content


def test_a_real_worker_answers_the_ping_task(
    transactional_db: None, celery_worker_proc: Any
) -> None:
    assert ping.apply_async(expires=30).get(timeout=30) == "pong"
    r = Client().get("/healthz", HTTP_ACCEPT="application/json")
    body = r.json()
    assert body["checks"]["worker"]["ok"] is True, body
    assert body["status"] == "ok"


def test_the_broker_in_use_is_the_configured_one() -> None:
    import os

    from console.celery import app

    configured = os.environ.get("CELERY_BROKER_URL") or "filesystem://"
    assert app.conf.broker_url.split("://")[0] == configured.split("://")[0]
