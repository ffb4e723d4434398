"""What "no desired version" means to a real agent (docs/protocol.md): an operator unsets a
desired tier config the agent refuses; the agent keeps the config it runs, reports no drift
and drops the apply error, and the node is healthy again on the console."""

from __future__ import annotations

from typing import Any

from django.test import Client

from tests.waiting import wait_for


def test_unsetting_a_refused_version_keeps_what_runs_and_drops_the_error(
    fleet: Any, versions: Any, operator: Any
) -> None:
    from console.fleet.models import Node
    from console.fleet.services import set_desired
    from console.tuning.models import TierConfigVersion

    v1, _ = versions
    ((node, agent),) = fleet(1)
    refused = TierConfigVersion.objects.create(
        name="tiers", version=9, config={"scheduler": {"queues": {"online": {"priority": "x"}}}}
    )
    set_desired([node], tier_config=refused, reason="test")
    wait_for(
        lambda: Node.objects.get(pk=node.pk).status() == "degraded",
        what="the agent to report refusing the version",
    )
    assert agent.status()["apply_errors"]["tier_config"]["version"] == refused.pk

    client = Client()
    client.force_login(operator)
    r = client.post(
        f"/api/v1/nodes/{node.pk}/unset-desired/",
        {"kind": "tier_config"},
        content_type="application/json",
    )
    assert r.status_code == 200, r.content
    wait_for(
        lambda: "tier_config" not in agent.status()["apply_errors"],
        what="the agent to drop the error",
    )
    status = agent.status()
    assert status["applied"]["tier_config"] == v1.pk  # it keeps what it ran
    assert status["desired_seen"]["tier_config"] is None
    wait_for(lambda: Node.objects.get(pk=node.pk).status() == "healthy", what="node healthy")
    node = Node.objects.get(pk=node.pk)
    assert node.apply_errors == {} and not node.tier_config_drift
