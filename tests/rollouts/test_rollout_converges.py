"""A tier config rollout converges on real agents, and rolling it back brings the previous
config back everywhere."""

from __future__ import annotations

from typing import Any

from tests.rollouts.rollout_helpers import QUICK, run_rollout, timeline


def test_a_tier_config_rollout_converges_and_its_rollback_restores_v1(
    fleet: Any, versions: Any
) -> None:
    from console.audit.models import AuditEvent
    from console.tuning.rollouts import services

    v1, v2 = versions
    nodes = fleet(2)
    rollout = services.create_rollout(
        tier_config=v2, canary_count=1, wave_size=1, convergence_timeout_s=15, start=False, **QUICK
    )
    rollout = run_rollout(rollout)
    assert rollout.state == "succeeded", timeline(rollout)
    assert sorted(rollout.nodes.values_list("wave", flat=True)) == [0, 1]
    assert set(rollout.nodes.values_list("state", flat=True)) == {"healthy"}
    for node, agent in nodes:
        assert agent.applied() == v2.pk
        node.refresh_from_db()
        assert (node.desired_tier_config_id, node.applied_tier_config_id) == (v2.pk, v2.pk)
    assert "wave 2 applied and healthy" in timeline(rollout)
    assert AuditEvent.objects.filter(
        object_type="tuning.rollout", object_id=str(rollout.pk), action="rollout"
    ).exists()

    back = run_rollout(services.rollback_rollout(rollout, start=False))
    assert back.state == "succeeded", timeline(back)
    assert back.kind == "rollback" and back.rollback_of_id == rollout.pk
    for node, agent in nodes:
        assert agent.applied() == v1.pk
        node.refresh_from_db()
        assert (node.desired_tier_config_id, node.applied_tier_config_id) == (v1.pk, v1.pk)
