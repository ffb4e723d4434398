"""The gateway's error contract (docs/architecture.md#the-request-path): body errors are 400s naming
the field, the engine's own errors come back in the gateway's shape with the engine's message, every
429 and 503 carries Retry-After; and the client never sets vLLM's `priority`."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from gpu_agent.sim.testing import free_port
from gpu_agent.testing import AgentProcess
from tests.agent.agent_helpers import (
    ALL_KEY,
    MODEL,
    OFFLINE_KEY,
    standalone_args,
    start_agent,
    tier_config,
)
from tests.agent.test_queueing import body, first_token_at, headers, wait_idle, wait_in_flight

URL = "/v1/chat/completions"
AUTH = {"Authorization": f"Bearer {ALL_KEY}", "Content-Type": "application/json"}
MESSAGES = '"messages": [{"role": "user", "content": "hi"}]'


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error: dict[str, Any] = response.json()["error"]
    assert set(error) == {"message", "type", "code"}
    return error


def post_raw(agent: AgentProcess, raw: str) -> httpx.Response:
    return httpx.post(agent.url + URL, content=raw.encode(), headers=AUTH)


@pytest.mark.parametrize(
    ("model", "says"),
    [(None, "model: required"), ("3", "must be a string, got int 3"), ("null", "required")],
)
def test_a_missing_or_mistyped_model_is_a_400_naming_it(
    agent: AgentProcess, model: str | None, says: str
) -> None:
    field = "" if model is None else f'"model": {model}, '
    error = error_of(post_raw(agent, "{" + field + MESSAGES + "}"), 400)
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_model"
    assert says in error["message"]


@pytest.mark.parametrize(
    ("field", "literal"),
    [("temperature", "NaN"), ("temperature", "Infinity"), ("top_p", "-Infinity"), ("x", "1e999")],
)
def test_nan_and_infinities_are_refused_naming_the_field(
    agent: AgentProcess, field: str, literal: str
) -> None:
    raw = f'{{"model": "{MODEL}", {MESSAGES}, "{field}": {literal}}}'
    error = error_of(post_raw(agent, raw), 400)
    assert error["code"] == "invalid_number"
    assert error["message"] == f"{field}: must be a finite number, got {literal}"


def test_a_nested_non_finite_number_is_named_by_its_path(agent: AgentProcess) -> None:
    raw = f'{{"model": "{MODEL}", {MESSAGES}, "logit_bias": {{"7": NaN}}}}'
    assert "logit_bias.7: must be" in error_of(post_raw(agent, raw), 400)["message"]


@pytest.mark.parametrize("stream", [False, True])
def test_the_engines_400_comes_back_in_the_gateways_shape_with_its_message(
    agent: AgentProcess, stream: bool
) -> None:
    request = {**body(100_000, stream=stream), "max_tokens": 100_000}
    response = httpx.post(agent.url + URL, json=request, headers=AUTH)
    error = error_of(response, 400)
    assert error["type"] == "invalid_request_error" and error["code"] == "engine_rejected"
    # The simulator's (vLLM's) own words, and the field it named.
    assert error["message"].startswith("max_tokens: This model's maximum context length is")
    # The official client reads it as any OpenAI 400.
    with (
        openai.OpenAI(base_url=agent.url + "/v1", api_key=ALL_KEY, max_retries=0) as client,
        pytest.raises(openai.BadRequestError, match="maximum context length"),
    ):
        client.chat.completions.create(
            model=MODEL, messages=request["messages"], max_tokens=100_000, stream=stream
        )


def test_unknown_paths_and_methods_answer_in_the_error_shape(agent: AgentProcess) -> None:
    assert error_of(httpx.get(agent.url + "/v1/nope"), 404)["code"] == "not_found"
    assert error_of(httpx.post(agent.url + "/health"), 405)["code"] == "method_not_allowed"


async def test_a_queue_timeout_503_carries_retry_after(tight_agent: AgentProcess) -> None:
    await wait_idle(tight_agent)
    async with httpx.AsyncClient(base_url=tight_agent.url, timeout=30) as client:
        # Seconds at the engine: the "brief" request cannot get the slot within its 200 ms.
        busy = asyncio.create_task(first_token_at(client, "offline", 4000))
        await wait_in_flight(tight_agent)
        response = await client.post(URL, json=body(2), headers=headers("brief"))
        busy.cancel()
    error = error_of(response, 503)
    assert error["code"] == "queue_timeout"
    assert int(response.headers["retry-after"]) >= 1
    assert int(response.headers["retry-after-ms"]) >= 1
    await wait_idle(tight_agent)


def test_an_unreachable_engine_is_a_503_with_retry_after(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with start_agent(standalone_args(tmp_path, dead, tier_config()), tmp_path / "log") as agent:
        response = httpx.post(agent.url + URL, json=body(2, stream=False), headers=AUTH)
        assert error_of(response, 503)["code"] == "engine_down"
        assert int(response.headers["retry-after"]) >= 1
        models = httpx.get(agent.url + "/v1/models", headers=AUTH)
        assert error_of(models, 503)["code"] == "engine_down"
        assert int(models.headers["retry-after"]) >= 1


def engine_priorities(sim_url: str, since: float, request_id: str) -> list[int]:
    records = httpx.get(sim_url + "/sim/v1/requests", params={"since": since}).json()["data"]
    return [r["priority"] for r in records if r["request_id"] == request_id]


def test_a_clients_priority_is_replaced_by_its_tiers(agent: AgentProcess, sim_url: str) -> None:
    since = time.time()
    request_id = f"promote-{time.time_ns()}"
    response = httpx.post(
        agent.url + URL,
        json={**body(2, stream=False), "priority": -100},
        headers={"Authorization": f"Bearer {OFFLINE_KEY}", "X-Request-Id": request_id},
    )
    assert response.status_code == 200, response.text
    assert engine_priorities(sim_url, since, request_id) == [3]  # the offline tier's


def test_without_pass_priority_a_clients_priority_is_removed(sim_url: str, tmp_path: Path) -> None:
    config = tier_config({"pass_priority": False})
    since = time.time()
    request_id = f"promote-{time.time_ns()}"
    with start_agent(standalone_args(tmp_path, sim_url, config), tmp_path / "log") as agent:
        response = httpx.post(
            agent.url + URL,
            json={**body(2, stream=False), "priority": -100},
            headers={"Authorization": f"Bearer {OFFLINE_KEY}", "X-Request-Id": request_id},
        )
    assert response.status_code == 200, response.text
    assert engine_priorities(sim_url, since, request_id) == [0]  # vLLM's default: none sent
