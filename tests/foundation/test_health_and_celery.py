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


def test_healthz_says_no_worker_answered_without_a_raw_file_error(
    db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from console.core import health

    # A real ping on a queue no worker consumes: what /healthz meets before any worker is up,
    # whether or not this session started one. The file result backend then has no file.
    real = ping.apply_async
    monkeypatch.setattr(
        ping, "apply_async", lambda **kw: real(queue="tiergate-nobody-listens", **kw)
    )
    monkeypatch.setattr(health, "WORKER_PING_TIMEOUT_S", 0.5)
    r = Client().get("/healthz", HTTP_ACCEPT="application/json")
    worker = r.json()["checks"]["worker"]
    assert r.status_code == 200 and worker["ok"] is False
    assert worker["detail"].startswith("no worker answered a ping within")
    assert "Error" not in worker["detail"] and "/" not in worker["detail"]
    page = Client().get("/healthz").content.decode()
    assert "FileNotFoundError" not in page and "celery-task-meta" not in page
