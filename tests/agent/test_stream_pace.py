"""A tier's `stream_pace_ms` (docs/admission.md): after the first token, the gateway reads the
engine for that tier's streams at most once per interval, so the client gets the tokens made
meanwhile in one piece. Real processes: the simulator, the agent, a client on the wire."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

from gpu_agent.sim.testing import run_sim_process
from gpu_agent.testing import AgentProcess
from tests.agent.agent_helpers import ALL_KEY, MODEL, queue, standalone_args, start_agent
from tests.agent.agent_helpers import tier_config as make_config

TOKENS = 60
PACE_MS = 100


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    # Time scale 20: a few milliseconds a token, so 60 tokens take a few hundred.
    sim = ("--sim-preset", "tiny-test", "--sim-time-scale", "20", "--max-num-seqs", "16",
           "--sim-eos-mean-tokens", "1000000")  # fmt: skip
    tmp = tmp_path_factory.mktemp("pace")
    config = make_config(batch=queue(2, stream_pace_ms=PACE_MS))
    with (
        run_sim_process(MODEL, sim) as url,
        start_agent(standalone_args(tmp, url, config), tmp / "log") as proc,
    ):
        yield proc


def _stream(agent: AgentProcess, tier: str) -> tuple[list[bytes], float, float]:
    """The raw pieces the client read, its seconds to the first token and to the end."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "go"}],
            "max_tokens": TOKENS, "ignore_eos": True, "stream": True}  # fmt: skip
    headers = {"authorization": f"Bearer {ALL_KEY}", "x-tiergate-tier": tier}
    pieces: list[bytes] = []
    first = 0.0
    t0 = time.perf_counter()
    with httpx.stream("POST", f"{agent.url}/v1/chat/completions", json=body, headers=headers,
                      timeout=30) as resp:  # fmt: skip
        assert resp.status_code == 200, resp.read()
        assert resp.headers["x-tiergate-tier"] == tier
        for piece in resp.iter_raw():
            if not first and b'"content":"' in piece:
                first = time.perf_counter() - t0
            pieces.append(piece)
    return pieces, first, time.perf_counter() - t0


def _tokens(pieces: list[bytes]) -> int:
    events = [e for e in b"".join(pieces).split(b"\n\n") if e.startswith(b"data: {")]
    deltas = [json.loads(e[6:])["choices"][0]["delta"].get("content") for e in events]
    return sum(1 for d in deltas if d)


def test_a_paced_tier_gets_its_tokens_in_fewer_pieces_and_the_others_each_as_made(
    agent: AgentProcess,
) -> None:
    online, online_first, online_took = _stream(agent, "online")
    batch, batch_first, batch_took = _stream(agent, "batch")
    assert _tokens(online) == _tokens(batch) == TOKENS  # nothing lost either way
    assert all(b"data: [DONE]" in b"".join(got[-2:]) for got in (online, batch))
    assert online_took > 3 * PACE_MS / 1000  # the stream is long enough for pacing to show
    assert len(online) >= TOKENS * 2 // 3, len(online)  # about a piece a token, unpaced
    # Paced: the first token as it came, then at most a piece per 100 ms (and the last): 61
    # pieces online against 16 paced when measured.
    assert len(batch) <= batch_took / (PACE_MS / 1000) + 3, (len(batch), batch_took)
    assert batch_first < PACE_MS / 1000 + online_first, (batch_first, online_first)
    assert batch_took < online_took + 2 * PACE_MS / 1000  # the end waits at most a pace
