"""No plaintext secret (endpoint key, node token, gateway key) in any API response, page,
log line, database row or the database files themselves."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from console.fleet.models import Endpoint, GatewayKey
from tests.fleet.fleet_helpers import beat, post_beat

SECRET = "sk-conf-PLAINTEXT-7f3a9c"


def _all_text_in_database() -> str:
    chunks = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')
            chunks.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(chunks)


def _database_files() -> list[Path]:
    name = Path(str(connection.settings_dict["NAME"]))
    return [p for p in (name, Path(f"{name}-wal"), Path(f"{name}-journal")) if p.exists()]


def _secrets_in_files(paths: list[Path], secrets: list[str]) -> list[str]:
    """Which secrets occur in the files, read by another process. Reading an open SQLite
    file from this process would close a descriptor of it, and POSIX drops every lock the
    process holds on a file when any of its descriptors closes: SQLite's own connections here
    would lose their locks and other processes could corrupt the database."""
    script = (
        "import sys, json; secrets = json.loads(sys.argv[1]); "
        "data = b''.join(open(p, 'rb').read() for p in sys.argv[2:]); "
        "print(json.dumps([s for s in secrets if s.encode() in data]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, json.dumps(secrets), *map(str, paths)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


@pytest.mark.django_db(transaction=True)
def test_no_plaintext_secret_anywhere(superuser: Any, api: Any, caplog: Any) -> None:
    caplog.set_level(logging.DEBUG)
    client = api(superuser)
    secrets: list[str] = [SECRET]
    bodies: list[str] = []

    r = client.post(
        "/api/v1/endpoints/",
        {
            "name": "conf",
            "base_url": "http://127.0.0.1:9/v1",
            "api_key": SECRET,
            "kind": "external",
        },
        format="json",
    )
    assert r.status_code == 201
    endpoint_id = r.json()["id"]
    bodies.append(r.content.decode())
    r = client.post("/api/v1/nodes/", {"name": "n1"}, format="json")
    token = r.json()["token"]
    secrets.append(token)
    r = client.post(
        "/api/v1/gateway-keys/",
        {"name": "ops", "tiers": ["online"], "default_tier": "online"},
        format="json",
    )
    secrets.append(r.json()["key"])
    # The node's first beat makes the console's own gateway key for it.
    reply = post_beat(Client(), token, beat(listen_url="http://127.0.0.1:9101"))
    bodies.append(reply.content.decode())
    secrets.append(Endpoint.objects.get(kind="gateway").get_api_key())
    # The doctor fails against a closed port; its answer must not echo the key either.
    bodies.append(client.post(f"/api/v1/endpoints/{endpoint_id}/doctor/").content.decode())
    bodies.append(
        client.patch(
            f"/api/v1/endpoints/{endpoint_id}/", {"api_key": SECRET + "-v2"}, format="json"
        ).content.decode()
    )
    secrets.append(SECRET + "-v2")

    for path in [
        "/api/v1/endpoints/",
        f"/api/v1/endpoints/{endpoint_id}/",
        f"/api/v1/endpoints/{endpoint_id}/env/",
        "/api/v1/nodes/",
        "/api/v1/gateway-keys/",
        "/api/v1/audit-events/",
    ]:
        bodies.append(client.get(path).content.decode())
    browser = Client()
    browser.force_login(superuser)
    for path in [
        "/fleet/",
        "/fleet/live/",
        "/fleet/endpoints/",
        f"/fleet/endpoints/{endpoint_id}/",
        f"/fleet/endpoints/{endpoint_id}/edit/",
        "/fleet/keys/",
        "/audit/",
        f"/admin/fleet/endpoint/{endpoint_id}/change/",
        "/admin/fleet/gatewaykey/",
    ]:
        r = browser.get(path)
        assert r.status_code == 200, path
        bodies.append(r.content.decode())

    everything = "\n".join(bodies)
    logs = "\n".join(r.getMessage() for r in caplog.records)
    rows = _all_text_in_database()
    in_files = _secrets_in_files(_database_files(), secrets)
    assert GatewayKey.objects.count() == 2
    for secret in secrets:
        assert secret not in everything
        assert secret not in logs
        assert secret not in rows
        assert secret not in in_files
    assert "sk-...3a9c" in everything  # the masked form is what people see
