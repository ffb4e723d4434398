"""The bare relay of the headline's arm (p) (lab.relay_floor), as a real process in front
of the simulator: what comes back through it is what the engine sent, request by request, and
an engine it cannot reach is a 502, not a hang."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from console.bench.headline.procs import free_port
from gpu_agent.sim.testing import run_sim_process
from lab.headline.procs import run_relay


def _texts(stream: str) -> tuple[list[str], list[str]]:
    """The completion's text pieces and the lines that are not `data: {...}` events."""
    texts, other = [], []
    for line in stream.splitlines():
        if line.startswith("data: {"):
            texts.append(json.loads(line[6:])["choices"][0]["text"])
        elif line:
            other.append(line)
    return texts, other


def test_the_relay_passes_streams_and_answers_through_unchanged(tmp_path: Path) -> None:
    body = {"model": "demo", "prompt": "the relay floor", "max_tokens": 12, "stream": True,
            "ignore_eos": True, "priority": 1}  # fmt: skip
    args = ["--scheduling-policy", "priority"]
    with run_sim_process(extra_args=args) as engine, run_relay(engine, tmp_path, "t") as relay:
        direct = httpx.post(engine + "/v1/completions", json=body, timeout=30)
        via = httpx.post(relay + "/v1/completions", json=body, timeout=30)
        assert via.status_code == direct.status_code == 200
        assert via.headers["content-type"].startswith("text/event-stream")
        direct_texts, direct_other = _texts(direct.text)
        texts, other = _texts(via.text)
        assert len(texts) == len(direct_texts) >= 12
        assert other == direct_other == ["data: [DONE]"]
        # A whole answer and the engine's own refusal come back as the engine gave them.
        whole = httpx.post(relay + "/v1/completions", json={**body, "stream": False}, timeout=30)
        assert whole.status_code == 200 and whole.json()["choices"][0]["text"]
        bad = {**body, "max_tokens": -1}
        refused = httpx.post(relay + "/v1/completions", json=bad, timeout=30)
        engine_refused = httpx.post(engine + "/v1/completions", json=bad, timeout=30)
        assert refused.status_code == engine_refused.status_code == 400
        assert refused.json() == engine_refused.json()
        assert httpx.get(relay + "/nowhere", timeout=5).status_code == 404


def test_an_engine_the_relay_cannot_reach_is_a_502(tmp_path: Path) -> None:
    gone = f"http://127.0.0.1:{free_port()}"
    with run_relay(gone, tmp_path, "t") as relay:
        answer = httpx.post(relay + "/v1/completions", json={"model": "m"}, timeout=30)
        assert answer.status_code == 502 and answer.text
