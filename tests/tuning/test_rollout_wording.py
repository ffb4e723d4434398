"""What a rollout's timeline says of its canary: "soaking" only where a soak was asked for; with
the soak set to none it is watched for the guard window like any wave (issue 58)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.rollouts.rollout_helpers import tier_config


def _timeline_after_canary_healthy(soak_s: float) -> str:
    from django.utils import timezone

    from console.fleet.models import Node
    from console.fleet.services import create_node, set_desired
    from console.tuning.rollouts.executor import Executor
    from console.tuning.rollouts.services import create_rollout
    from console.tuning.services import create_tier_config

    v1 = create_tier_config(name="tiers", config=tier_config(1))
    v2 = create_tier_config(name="tiers", config=tier_config(2))
    nodes = [create_node(name, [], None)[0] for name in ("gpu-a", "gpu-b")]
    set_desired(nodes, tier_config=v1)
    Node.objects.update(last_seen_at=timezone.now(), health={"gateway": "ok", "engine": "ok"})
    rollout = create_rollout(tier_config=v2, canary_soak_s=soak_s, start=False)
    assert rollout.has_guard  # the default guard watches for its window either way
    parts = list(rollout.nodes.select_related("node").filter(wave=0))
    Executor(rollout.pk, owner="test").wave_healthy(rollout, parts, timezone.now())
    return "\n".join(rollout.events.values_list("message", flat=True))


@pytest.mark.django_db
def test_no_soak_is_not_called_soaking() -> None:
    timeline = _timeline_after_canary_healthy(0.0)
    assert "wave 1 healthy; watching the SLO guard for 30 s" in timeline
    assert "soak" not in timeline


@pytest.mark.django_db
def test_a_soak_is_called_so() -> None:
    timeline = _timeline_after_canary_healthy(45.0)
    assert "wave 1 canary soaking; watching the SLO guard for 45 s" in timeline


def test_the_detail_page_says_the_soak_is_none(client: Any, operator: Any, db: None) -> None:
    from django.utils import timezone

    from console.fleet.models import Node
    from console.fleet.services import create_node, set_desired
    from console.tuning.rollouts.services import create_rollout
    from console.tuning.services import create_tier_config

    v1 = create_tier_config(name="tiers", config=tier_config(1))
    v2 = create_tier_config(name="tiers", config=tier_config(2))
    node, _ = create_node("gpu-a", [], None)
    set_desired([node], tier_config=v1)
    Node.objects.update(last_seen_at=timezone.now(), health={"gateway": "ok", "engine": "ok"})
    rollout = create_rollout(tier_config=v2, canary_soak_s=0, start=False)
    client.force_login(operator)
    page = client.get(f"/tuning/rollouts/{rollout.pk}/").content.decode()
    assert "<dt>Canary soak</dt><dd>none</dd>" in page
