"""The gateway seen by clients: the official openai client streamed and not, keys and tiers,
OpenAI-shaped errors, and /metrics."""

from __future__ import annotations

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpu_agent.testing import AgentProcess
from tests.agent.agent_helpers import ALL_KEY, MODEL, NODE_TOKEN, OFFLINE_KEY

BODY = {"model": MODEL, "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 4}


def client(agent: AgentProcess, key: str = ALL_KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=agent.url + "/v1", api_key=key, max_retries=0)


def test_it_streams_chat_through_the_official_client(agent: AgentProcess) -> None:
    stream = client(agent).chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "tell me a story"}],
        max_tokens=12,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    pieces, usage = [], None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        if chunk.usage is not None:
            usage = chunk.usage
    assert len(pieces) == 12
    assert usage is not None and usage.completion_tokens == 12


def test_it_answers_non_streamed_chat_and_completions(agent: AgentProcess) -> None:
    chat = client(agent).chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=5,
        extra_body={"ignore_eos": True},
    )
    assert chat.choices[0].message.content
    assert chat.usage is not None and chat.usage.completion_tokens == 5
    text = client(agent).completions.create(model=MODEL, prompt="once upon", max_tokens=3)
    assert text.choices[0].text


def test_it_streams_text_completions(agent: AgentProcess) -> None:
    stream = client(agent).completions.create(
        model=MODEL,
        prompt="once upon a time",
        max_tokens=6,
        stream=True,
        extra_body={"ignore_eos": True},
    )
    assert sum(1 for chunk in stream if chunk.choices and chunk.choices[0].text) == 6


def test_it_lists_the_engines_models_to_key_holders(agent: AgentProcess) -> None:
    assert [m.id for m in client(agent).models.list()] == [MODEL]
    assert httpx.get(agent.url + "/v1/models").status_code == 401


def test_it_rejects_a_bad_key_with_401(agent: AgentProcess) -> None:
    with pytest.raises(openai.AuthenticationError) as info:
        client(agent, "tgk_wrong").chat.completions.create(**BODY)
    assert info.value.status_code == 401
    response = httpx.post(agent.url + "/v1/chat/completions", json=BODY)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"


def test_it_refuses_a_tier_the_key_does_not_allow(agent: AgentProcess) -> None:
    headers = {"Authorization": f"Bearer {OFFLINE_KEY}", "X-Tiergate-Tier": "online"}
    response = httpx.post(agent.url + "/v1/chat/completions", json=BODY, headers=headers)
    assert response.status_code == 403
    error = response.json()["error"]
    assert set(error) == {"message", "type", "code"} and error["code"] == "tier_not_allowed"
    # The same key in its own tier is served.
    headers["X-Tiergate-Tier"] = "offline"
    assert (
        httpx.post(agent.url + "/v1/chat/completions", json=BODY, headers=headers).status_code
        == 200
    )


def test_it_says_404_for_an_unknown_model(agent: AgentProcess) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client(agent).chat.completions.create(**{**BODY, "model": "no-such-model"})
    assert info.value.status_code == 404


def test_it_refuses_a_body_over_the_limit_with_413(agent: AgentProcess) -> None:
    big = {**BODY, "messages": [{"role": "user", "content": "x" * (1 << 20)}]}
    response = httpx.post(
        agent.url + "/v1/chat/completions", json=big, headers={"Authorization": f"Bearer {ALL_KEY}"}
    )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"


def test_it_says_400_for_a_body_that_is_not_json(agent: AgentProcess) -> None:
    response = httpx.post(
        agent.url + "/v1/chat/completions",
        content=b"{nope",
        headers={"Authorization": f"Bearer {ALL_KEY}", "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_its_metrics_parse_and_count_requests_per_tier(agent: AgentProcess) -> None:
    headers = {"Authorization": f"Bearer {ALL_KEY}", "X-Tiergate-Tier": "batch"}
    assert (
        httpx.post(agent.url + "/v1/chat/completions", json=BODY, headers=headers).status_code
        == 200
    )
    families = {
        f.name: f for f in text_string_to_metric_families(httpx.get(agent.url + "/metrics").text)
    }
    for name in (
        "tiergate_queue_depth",
        "tiergate_in_flight",
        "tiergate_effective_wait_seconds",
        "tiergate_ttft_seconds",
        "tiergate_queue_wait_seconds",
        "tiergate_requests",
        "tiergate_tokens",
        "tiergate_config_version",
        "tiergate_engine_up",
    ):
        assert name in families, name
    ok_batch = [
        s.value
        for s in families["tiergate_requests"].samples
        if s.name == "tiergate_requests_total" and s.labels == {"tier": "batch", "status": "ok"}
    ]
    assert ok_batch and ok_batch[0] >= 1
    assert {s.labels["tier"] for s in families["tiergate_queue_depth"].samples} == {
        "online",
        "batch",
        "offline",
    }


def test_its_status_needs_the_node_token(agent: AgentProcess) -> None:
    assert httpx.get(agent.url + "/agent/v1/status").status_code == 401
    wrong = httpx.get(agent.url + "/agent/v1/status", headers={"Authorization": "Bearer x"})
    assert wrong.status_code == 401
    status = httpx.get(
        agent.url + "/agent/v1/status", headers={"Authorization": f"Bearer {NODE_TOKEN}"}
    ).json()
    assert status["mode"] == "attached"
    assert set(status["tiers"]) == {"online", "batch", "offline"}
    assert status["health"]["gateway"] == "ok"
