"""The gateway in front of a real vLLM, driven with the official openai client: chat and
completions, streamed and not, and vLLM's own errors passed through in OpenAI's shape."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from gpu_agent.testing import AgentProcess
from tests.agent.agent_helpers import ALL_KEY, OFFLINE_KEY, queue, tier_config
from tests.vllm.vllm_helpers import (
    MODEL_NAME,
    NO_EOS,
    TIMEOUT,
    VllmServer,
    standalone_gateway,
)

pytestmark = [pytest.mark.vllm, TIMEOUT]


def client(agent: AgentProcess, key: str = ALL_KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=agent.url + "/v1", api_key=key, max_retries=0, timeout=120)


def test_chat_completion_through_the_gateway(gateway: AgentProcess) -> None:
    reply = client(gateway).chat.completions.create(
        model=MODEL_NAME,
        messages=[{"role": "user", "content": "hello there"}],
        max_tokens=7,
        extra_body=NO_EOS,
    )
    assert reply.model == MODEL_NAME
    assert reply.choices[0].finish_reason == "length"
    assert isinstance(reply.choices[0].message.content, str)
    assert reply.usage is not None and reply.usage.completion_tokens == 7
    assert reply.system_fingerprint and reply.system_fingerprint.startswith("vllm-")


def test_streamed_chat_completion_through_the_gateway(gateway: AgentProcess) -> None:
    stream = client(gateway).chat.completions.create(
        model=MODEL_NAME,
        messages=[{"role": "user", "content": "hello there"}],
        max_tokens=12,
        stream=True,
        stream_options={"include_usage": True},
        extra_body=NO_EOS,
    )
    chunks = list(stream)
    deltas = [c.choices[0].delta.content for c in chunks if c.choices]
    assert sum(1 for d in deltas if d) >= 2  # token by token, not one blob
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 12
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "length"


def test_completion_through_the_gateway(gateway: AgentProcess) -> None:
    reply = client(gateway).completions.create(
        model=MODEL_NAME, prompt="The quick brown fox", max_tokens=5, extra_body=NO_EOS
    )
    assert reply.object == "text_completion"
    assert reply.usage is not None and reply.usage.completion_tokens == 5
    assert reply.usage.prompt_tokens > 0


def test_streamed_completion_through_the_gateway(gateway: AgentProcess) -> None:
    stream = client(gateway).completions.create(
        model=MODEL_NAME,
        prompt="The quick brown fox",
        max_tokens=9,
        stream=True,
        stream_options={"include_usage": True},
        extra_body=NO_EOS,
    )
    chunks = list(stream)
    assert sum(1 for c in chunks if c.choices and c.choices[0].text) >= 2
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 9


def test_vllm_refusal_comes_back_in_openai_shape(
    gateway: AgentProcess, vllm_priority: VllmServer
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client(gateway).completions.create(model=MODEL_NAME, prompt="hi", max_tokens=100_000)
    assert caught.value.status_code == 400
    # vLLM's own words, so an operator sees what the engine said.
    assert "max_model_len" in caught.value.message
    direct = httpx.post(
        vllm_priority.url + "/v1/completions",
        json={"model": MODEL_NAME, "prompt": "hi", "max_tokens": 100_000},
        timeout=30,
    )
    assert direct.status_code == 400
    assert direct.json()["error"]["message"] in caught.value.message


def test_a_tier_the_key_does_not_allow_is_refused(gateway: AgentProcess) -> None:
    with pytest.raises(openai.PermissionDeniedError):
        client(gateway, OFFLINE_KEY).completions.create(
            model=MODEL_NAME, prompt="hi", max_tokens=2, extra_headers={"X-Tiergate-Tier": "online"}
        )


def test_an_unknown_model_is_a_404(gateway: AgentProcess) -> None:
    with pytest.raises(openai.NotFoundError):
        client(gateway).completions.create(model="no-such-model", prompt="hi", max_tokens=2)


INTERVAL = 8


@pytest.fixture(scope="module")
def interval_gateway(
    vllm_priority: VllmServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AgentProcess]:
    """The gateway with offline's streams asked of vLLM in pieces of INTERVAL tokens."""
    config = tier_config({"pass_priority": True},
                         offline=queue(3, stream_interval_tokens=INTERVAL))  # fmt: skip
    with standalone_gateway(tmp_path_factory.mktemp("interval"), vllm_priority.url, config) as a:
        yield a


def test_a_tiers_stream_interval_is_honoured_by_vllm(interval_gateway: AgentProcess) -> None:
    """vLLM's own per-request `stream_interval`, written in by the gateway for offline: the
    first token alone, then pieces of INTERVAL tokens, and the same answer as online's."""

    def pieces(key: str) -> tuple[list[str], int]:
        stream = client(interval_gateway, key).completions.create(
            model=MODEL_NAME, prompt="The quick brown fox", max_tokens=33, temperature=0,
            stream=True, stream_options={"include_usage": True}, extra_body=NO_EOS,
        )  # fmt: skip
        chunks = list(stream)
        assert chunks[-1].usage is not None
        return [c.choices[0].text for c in chunks if c.choices], chunks[-1].usage.completion_tokens

    online, online_tokens = pieces(ALL_KEY)
    offline, offline_tokens = pieces(OFFLINE_KEY)
    assert online_tokens == offline_tokens == 33
    assert "".join(offline) == "".join(online)  # greedy: the same text, all of it
    assert len(online) >= 30  # about a piece a token where the tier sets none
    # 1 + 32 / 8 = 5 pieces of text (vLLM may send the finish in one more, empty).
    assert len([p for p in offline if p]) <= 1 + 32 // INTERVAL + 1, offline
