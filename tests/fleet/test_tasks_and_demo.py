from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from console.core.demo import DEMO_SEEDERS, DemoContext
from console.fleet import demo
from console.fleet.crypto import sha256_hex
from console.fleet.models import Node, TelemetrySample
from console.fleet.tasks import prune_telemetry, prune_telemetry_task
from tests.fleet.fleet_helpers import beat, post_beat, sample

pytestmark = pytest.mark.django_db


def test_pruning_deletes_only_samples_past_retention(node_and_token: Any, settings: Any) -> None:
    settings.TIERGATE_TELEMETRY_RETENTION_HOURS = 2
    _, token = node_and_token
    now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    old = (now - timedelta(hours=3)).timestamp()
    fresh = (now - timedelta(hours=1)).timestamp()
    post_beat(Client(), token, beat(samples=[sample(old), sample(old + 1), sample(fresh)]))
    assert prune_telemetry(now) == 2
    assert prune_telemetry(now) == 0
    assert list(TelemetrySample.objects.values_list("ts", flat=True)) == [
        datetime.fromtimestamp(fresh, UTC)
    ]


def test_the_prune_task_is_scheduled_and_callable(settings: Any) -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["fleet-prune-telemetry"]
    assert entry["task"] == prune_telemetry_task.name == "fleet.prune_telemetry"
    assert prune_telemetry_task() == 0


def test_demo_seeder_writes_tokens_that_authenticate(settings: Any, tmp_path: Any) -> None:
    settings.DATA_DIR = tmp_path
    assert "console.fleet.demo.seed" in DEMO_SEEDERS
    ctx = DemoContext(host="127.0.0.1", port=8000, data_dir=tmp_path, admin=None)
    notes = demo.seed(ctx)
    assert notes and "demo-node-1" in notes[0]
    entries = json.loads((tmp_path / "demo-nodes.json").read_text())
    assert [(e["name"], e["engine_port"], e["agent_port"]) for e in entries] == [
        ("demo-node-1", 8101, 9101),
        ("demo-node-2", 8102, 9102),
    ]
    for entry in entries:
        node = Node.objects.get(name=entry["name"])
        assert node.token_sha256 == sha256_hex(entry["token"])
        assert post_beat(Client(), entry["token"], beat()).status_code == 200
    # Seeding again keeps the tokens.
    demo.seed(ctx)
    assert json.loads((tmp_path / "demo-nodes.json").read_text()) == entries
