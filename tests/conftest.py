"""Shared fixtures: named users per role, API clients, and a real Celery worker process."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """The live test server answers on a kept-alive connection without Nagle's delay. Its
    handler writes the head and the body of a response in two sends; with Nagle on, the body
    waits for the client's delayed ACK of the head, about 40 ms on Linux, so every request on a
    kept-alive connection (schemathesis' session, an agent's heartbeats) took 50 ms or more
    where it takes 10."""
    from django.core.servers.basehttp import WSGIRequestHandler

    WSGIRequestHandler.disable_nagle_algorithm = True


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what importing and collecting made, so that the collection after each test
    (below) looks only at what that test made."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _collect_after_each_test() -> Iterator[None]:
    """Collect garbage as each test ends: an unclosed socket or file (a ResourceWarning, an
    error in this suite) then fails the test that leaked it, not whichever later test the
    collector happened to run in. What survives is frozen, to keep the next collection short."""
    yield
    gc.collect()
    gc.freeze()


def _password() -> str:
    return "tiergate-test-pw-1"


def _user(django_user_model: Any, name: str, role: str | None) -> Any:
    from django.contrib.auth.models import Group

    from console.core.roles import ensure_role_groups

    ensure_role_groups()
    user = django_user_model.objects.create_user(name, f"{name}@example.com", _password())
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def viewer(db: None, django_user_model: Any) -> Any:
    return _user(django_user_model, "vera", "viewer")


@pytest.fixture
def operator(db: None, django_user_model: Any) -> Any:
    return _user(django_user_model, "otto", "operator")


@pytest.fixture
def admin_user(db: None, django_user_model: Any) -> Any:
    return _user(django_user_model, "ada", "admin")


@pytest.fixture
def outsider(db: None, django_user_model: Any) -> Any:
    """Signed in, but holding no role."""
    return _user(django_user_model, "oscar", None)


def api_client_for(user: Any) -> Any:
    from rest_framework.test import APIClient

    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


@pytest.fixture
def api() -> Any:
    """api(user) -> an APIClient authenticated as that user (None: anonymous)."""
    return api_client_for


def test_database_url() -> str:
    """A URL that lets a child process (Celery worker, agent) open the test database."""
    from django.db import connection

    sd = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{sd['NAME']}"
    user = sd.get("USER") or ""
    password = f":{sd['PASSWORD']}" if sd.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{sd.get('HOST') or '127.0.0.1'}:{sd.get('PORT') or 5432}/{sd['NAME']}"


test_database_url.__test__ = False  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def celery_worker_proc(
    django_db_setup: Any, django_db_blocker: Any
) -> Iterator[subprocess.Popen[bytes]]:
    """A real Celery worker process on the configured broker, writing to the test database.

    Tests that need it must use `transactional_db` so their rows are committed and visible."""
    with django_db_blocker.unblock():
        env = {**os.environ, "DATABASE_URL": test_database_url()}
    log = open(Path(os.environ.get("TIERGATE_DATA_DIR", ROOT / "data")) / "test-worker.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "console",
            "worker",
            "--pool",
            "threads",
            "--concurrency",
            "4",
            "--loglevel",
            "INFO",
            "--without-mingle",
            "--without-gossip",
            "--hostname",
            f"test-{os.getpid()}@%h",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    from console.core.tasks import ping

    deadline = time.monotonic() + 60
    while True:
        try:
            ping.apply_async(expires=10).get(timeout=2)
            break
        except Exception:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("the Celery worker did not start; see test-worker.log") from None
    yield proc
    # SIGKILL: every test has waited for the tasks it cares about, and a warm shutdown takes
    # seconds on the filesystem broker (its loop looks for the signal between waits of up to
    # 2 s for a message).
    proc.kill()
    proc.wait()
    log.close()


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def browser_page(live_server: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A Playwright page in Debian's Chromium, pointed at the live test server.

    Playwright's sync API runs an event loop in this thread; Django refuses ORM calls from a
    thread with a running loop unless told it is safe, which it is here (one test thread)."""
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(base_url=live_server.url)
        page = context.new_page()
        page.set_default_timeout(15000)
        try:
            yield page
        finally:
            context.close()
            browser.close()


def sign_in(page: Any, username: str, password: str = "tiergate-test-pw-1") -> None:
    page.goto("/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


@pytest.fixture(scope="session", autouse=True)
def _end_stray_database_sessions(django_db_setup: Any, django_db_blocker: Any) -> Iterator[None]:
    """At the end, end any PostgreSQL session still open on the test database (a connection
    a live-server or Playwright thread opened and never closed), so that dropping it works."""
    yield
    from django.db import connection, connections

    connections.close_all()
    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    connection.close()
