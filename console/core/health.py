"""Health checks behind /healthz: database, broker, and whether a worker answers a ping."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from django.db import connection

from console.celery import app as celery_app

WORKER_PING_TIMEOUT_S = 3.0


class CheckFailed(Exception):
    """A failure whose message is meant for the page as it is (no exception type prefix)."""


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    latency_ms: float


def _timed(name: str, func: Callable[[], str]) -> Check:
    started = time.perf_counter()
    try:
        detail = func()
        ok = True
    except CheckFailed as exc:
        detail, ok = str(exc), False
    except Exception as exc:  # a health page reports every failure rather than raising
        detail, ok = f"{type(exc).__name__}: {exc}", False
    return Check(name, ok, detail, round((time.perf_counter() - started) * 1000, 1))


def _database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return f"{connection.vendor} ok"


def _broker() -> str:
    with celery_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)
        return f"{conn.transport_cls} ok"


def _worker() -> str:
    from console.core.tasks import ping

    result = ping.apply_async(expires=WORKER_PING_TIMEOUT_S + 2)
    try:
        answer = result.get(timeout=WORKER_PING_TIMEOUT_S, interval=0.05)
    except Exception:
        # Best effort: with the file result backend there is no result file to delete when no
        # worker answered, and that error (with its path) is not what the page should say.
        with contextlib.suppress(Exception):
            result.forget()
        raise CheckFailed(
            f"no worker answered a ping within {WORKER_PING_TIMEOUT_S:g} s "
            "(none started yet, or all busy)"
        ) from None
    return f"worker answered {answer!r}"


def run_checks(include_worker: bool = True) -> dict[str, object]:
    checks = [_timed("database", _database), _timed("broker", _broker)]
    if include_worker:
        checks.append(_timed("worker", _worker))
    return {
        "status": "ok" if all(c.ok for c in checks) else "degraded",
        "checks": {c.name: asdict(c) for c in checks},
    }
