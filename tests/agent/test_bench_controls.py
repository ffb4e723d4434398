"""The benchmark controls a console uses on a node: the engine's counters and host load, and
a prefix-cache reset, behind the node token or an all-tier gateway key."""

from __future__ import annotations

import httpx

from gpu_agent.testing import AgentProcess
from tests.agent.agent_helpers import ALL_KEY, MODEL, NODE_TOKEN, OFFLINE_KEY

STATE = "/agent/v1/engine/state"
RESET = "/agent/v1/engine/reset-prefix-cache"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_the_controls_refuse_no_key_a_bad_key_and_a_key_short_of_tiers(
    agent: AgentProcess,
) -> None:
    for path, method in ((STATE, "GET"), (RESET, "POST")):
        assert httpx.request(method, agent.url + path).status_code == 401
        assert httpx.request(method, agent.url + path, headers=bearer("x")).status_code == 401
        short = httpx.request(method, agent.url + path, headers=bearer(OFFLINE_KEY))
        assert short.status_code == 403
        assert short.json()["error"]["code"] == "tier_not_allowed"


def test_a_reset_makes_the_same_prompt_miss_the_cache_again(agent: AgentProcess) -> None:
    body = {"model": MODEL, "prompt": "bench control " * 100, "max_tokens": 2}

    def hits_of_one_request() -> float:
        before = httpx.get(agent.url + STATE, headers=bearer(ALL_KEY)).json()
        answer = httpx.post(agent.url + "/v1/completions", json=body, headers=bearer(ALL_KEY))
        assert answer.status_code == 200
        after = httpx.get(agent.url + STATE, headers=bearer(ALL_KEY)).json()
        assert after["host"]["cpus"] >= 1 and after["host"]["load1"] >= 0
        return float(after["engine"]["prefix_hits"] - before["engine"]["prefix_hits"])

    hits_of_one_request()
    assert hits_of_one_request() > 100
    reset = httpx.post(agent.url + RESET, headers=bearer(NODE_TOKEN))
    assert reset.status_code == 200 and reset.json() == {"reset": True}
    assert hits_of_one_request() == 0
