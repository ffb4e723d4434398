"""A tier's streams in fewer pieces (docs/admission.md). Real processes: the simulator (which
honours vLLM's per-request `stream_interval` as vLLM does), the agent, a client on the wire.

- `stream_interval_tokens` (offline here): the gateway asks the engine for that tier's streams
  in pieces of so many tokens. The same against a real vLLM: tests/vllm/test_gateway.py.
  (`stream_pace_ms`, the gateway reading a tier's streams once per pace, was removed: the
  interval does the same in the engine, with no timer and no late end.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from gpu_agent.sim.testing import run_sim_process
from gpu_agent.testing import AgentProcess
from tests.agent.agent_helpers import ALL_KEY, MODEL, queue, standalone_args, start_agent
from tests.agent.agent_helpers import tier_config as make_config

TOKENS = 60
INTERVAL = 10


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    # Time scale 20: a few milliseconds a token, so 60 tokens take a few hundred.
    sim = ("--sim-preset", "tiny-test", "--sim-time-scale", "20", "--max-num-seqs", "16",
           "--sim-eos-mean-tokens", "1000000")  # fmt: skip
    tmp = tmp_path_factory.mktemp("pieces")
    config = make_config(offline=queue(3, stream_interval_tokens=INTERVAL))
    with (
        run_sim_process(MODEL, sim) as url,
        start_agent(standalone_args(tmp, url, config), tmp / "log") as proc,
    ):
        yield proc


def _events(agent: AgentProcess, tier: str, **extra: object) -> list[dict]:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "go"}],
            "max_tokens": TOKENS, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}, **extra}  # fmt: skip
    headers = {"authorization": f"Bearer {ALL_KEY}", "x-tiergate-tier": tier}
    with httpx.stream("POST", f"{agent.url}/v1/chat/completions", json=body, headers=headers,
                      timeout=30) as resp:  # fmt: skip
        assert resp.status_code == 200, resp.read()
        assert resp.headers["x-tiergate-tier"] == tier
        text = resp.read()
    assert text.rstrip().endswith(b"data: [DONE]")
    return [json.loads(e[6:]) for e in text.split(b"\n\n") if e.startswith(b"data: {")]


def _content(events: list[dict]) -> list[str]:
    """The content of each event that carries some."""
    deltas = [e["choices"][0]["delta"].get("content") for e in events if e["choices"]]
    return [d for d in deltas if d]


def test_the_tiers_streams_come_in_pieces_of_its_interval_with_every_token(
    agent: AgentProcess,
) -> None:
    online, offline = _events(agent, "online"), _events(agent, "offline")
    assert online[-1]["usage"]["completion_tokens"] == TOKENS
    assert offline[-1]["usage"]["completion_tokens"] == TOKENS
    assert "".join(_content(offline)) == "".join(_content(online))  # the same answer, all of it
    assert len(_content(online)) == TOKENS  # a piece a token where the tier sets none
    # The first token alone, then pieces of INTERVAL: 1 + 59 / 10 rounded up = 7.
    assert len(_content(offline)) == 1 + -(-(TOKENS - 1) // INTERVAL), _content(offline)
    # A client may ask its own tier for larger pieces, never smaller ones.
    larger = _events(agent, "offline", stream_interval=30)
    assert len(_content(larger)) == 1 + -(-(TOKENS - 1) // 30)
    smaller = _events(agent, "offline", stream_interval=2)
    assert len(_content(smaller)) == len(_content(offline))


def test_the_simulator_refuses_a_bad_interval_naming_the_field(agent: AgentProcess) -> None:
    body = {"model": MODEL, "prompt": "go", "max_tokens": 4, "stream": True,
            "stream_interval": 0}  # fmt: skip
    headers = {"authorization": f"Bearer {ALL_KEY}", "x-tiergate-tier": "online"}
    resp = httpx.post(f"{agent.url}/v1/completions", json=body, headers=headers, timeout=30)
    assert resp.status_code == 400, resp.text
    assert "stream_interval" in resp.text
