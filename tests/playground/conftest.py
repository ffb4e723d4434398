"""Two real engines for the playground: a simulator behind a standalone agent (a gateway whose
key allows online and batch) and a second simulator reached directly."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from gpu_agent.sim.testing import run_sim_process
from gpu_agent.testing import start_agent_process

KEY = "tgk_playground_online_batch_0123456789abcdef0123456789"
TIERS = {
    "scheduler": {
        "queues": {
            name: {
                "max_batch_size": 8,
                "max_waiting_time_ms": 1,
                "max_tokens_per_batch": 100000,
                "priority": rank,
            }
            for rank, name in enumerate(["online", "batch", "offline"], start=1)
        }
    }
}


@dataclass
class Engines:
    gateway_url: str
    direct_url: str


@pytest.fixture(scope="session")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engines]:
    tmp = tmp_path_factory.mktemp("playground")
    keys = tmp / "keys.json"
    keys.write_text(
        json.dumps(
            [{"name": "pg", "key": KEY, "tiers": ["online", "batch"], "default_tier": "online"}]
        )
    )
    tiers = tmp / "tiers.json"
    tiers.write_text(json.dumps(TIERS))
    with (
        run_sim_process("alpha") as alpha,
        run_sim_process("beta") as beta,
        start_agent_process(
            ["--engine-url", alpha, "--tier-config", str(tiers), "--keys", str(keys)],
            tmp / "agent.log",
        ) as agent,
    ):
        yield Engines(agent.url, beta)


@pytest.fixture
def endpoints(engines: Engines, db: None) -> dict[str, Any]:
    from console.fleet.choices import EndpointKind
    from console.fleet.models import Endpoint

    gateway = Endpoint(
        name="alpha-gw",
        base_url=engines.gateway_url + "/v1",
        kind=EndpointKind.GATEWAY,
        default_model="alpha",
    )
    gateway.set_api_key(KEY)
    gateway.save()
    direct = Endpoint(
        name="beta-direct",
        base_url=engines.direct_url + "/v1",
        kind=EndpointKind.VLLM,
        default_model="beta",
    )
    direct.save()
    dead = Endpoint(name="dead", base_url="http://127.0.0.1:9/v1", kind=EndpointKind.EXTERNAL)
    dead.default_model = "x"
    dead.save()
    return {"gateway": gateway, "direct": direct, "dead": dead}
