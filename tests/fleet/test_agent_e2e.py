"""The real agent (python -m gpu_agent) against the console's live server: it heartbeats,
its samples land, it applies the desired tier config, and the key the console made for the
node works on the node's gateway."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from console.fleet import services
from console.fleet.models import Endpoint, Node, TelemetrySample
from gpu_agent.sim.testing import run_sim_process
from gpu_agent.testing import start_agent_process
from tests.fleet.fleet_helpers import SEED_TIERS
from tests.waiting import wait_for


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_agent_converges_and_serves_with_the_consoles_key(
    live_server: Any, tmp_path: Path
) -> None:
    from console.tuning.services import create_tier_config

    node, token = services.create_node("e2e-node", ["sim"], None)
    config = create_tier_config(name="seed-000", config=SEED_TIERS)
    services.set_desired([node], tier_config=config, reason="e2e")
    args = [
        "--console",
        live_server.url,
        "--node-token",
        token,
        "--state-dir",
        str(tmp_path / "state"),
    ]
    with (
        run_sim_process("demo") as engine_url,
        start_agent_process([*args, "--engine-url", engine_url], tmp_path / "agent.log") as agent,
    ):

        def converged() -> bool:
            fresh = Node.objects.get(pk=node.pk)
            return fresh.applied_tier_config_id == config.pk and fresh.health.get("engine") == "ok"

        wait_for(converged, what="the agent to apply the tier config:\n" + agent.output())
        wait_for(lambda: TelemetrySample.objects.filter(node=node).count() >= 2, what="samples")
        fresh = Node.objects.get(pk=node.pk)
        assert fresh.mode == "attached" and fresh.listen_url == f"http://127.0.0.1:{agent.port}"
        assert fresh.is_simulated and fresh.last_sample["gpu_source"] == "simulated"
        assert fresh.keys_version  # the agent took the key set

        endpoint = Endpoint.objects.get(node=node, kind="gateway")
        assert endpoint.base_url == f"http://127.0.0.1:{agent.port}/v1"
        r = httpx.post(
            f"{endpoint.base_url}/chat/completions",
            timeout=20,
            headers={"Authorization": f"Bearer {endpoint.get_api_key()}"},
            json={
                "model": "demo",
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 2,
            },
        )
        assert r.status_code == 200, r.text
        assert (
            httpx.post(
                f"{endpoint.base_url}/chat/completions",
                timeout=20,
                headers={"Authorization": "Bearer tgk_wrong"},
                json={"model": "demo", "messages": []},
            ).status_code
            == 401
        )
