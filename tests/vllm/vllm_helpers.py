"""Real vLLM processes for the tests under tests/vllm/ (marker `vllm`, `make test-vllm`).

``with run_vllm(model, ["--max-num-seqs", "2"], log_path) as server: server.url``: vLLM's CPU
build from tools/vllm_env.py on the tiny local model, pinned to core 0 (tests, clients and
gateways keep to core 1, see conftest.py), listening on a free 127.0.0.1 port. Starting takes
a minute or more on a shared two-core machine, so the fixtures share one server per
configuration for the whole session.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpu_agent.sim.testing import free_port, wait_healthy
from gpu_agent.testing import AgentProcess
from tests.agent.agent_helpers import (
    ALL_KEY,
    FakeConsole,
    standalone_args,
    start_agent,
    write_json,
)
from tests.waiting import wait_for
from tools import vllm_env

# Minutes, not seconds: vLLM imports torch, loads the model and warms up on one busy core.
START_TIMEOUT_S = 900.0
# A test's limit includes the set-up of the session's servers it is the first to use.
TIMEOUT = pytest.mark.timeout(2 * START_TIMEOUT_S)
MODEL_NAME = "tiny"  # --served-model-name: what clients send as `model`
AUTH = {"Authorization": f"Bearer {ALL_KEY}"}
# Every request runs to its max_tokens: the random model would otherwise stop at a drawn EOS.
NO_EOS = {"ignore_eos": True}
BASE_FLAGS = ("--served-model-name", MODEL_NAME, "--max-model-len", "4096", "--dtype", "bfloat16")


@dataclass
class VllmServer:
    url: str  # http://127.0.0.1:PORT, no /v1
    process: subprocess.Popen[bytes]
    log_path: Path

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def samples(self) -> dict[str, float]:
        """Every sample of /metrics by name, summed over label sets (prometheus names:
        counters with their `_total`)."""
        text = httpx.get(self.url + "/metrics", timeout=10).text
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                out[sample.name] = out.get(sample.name, 0.0) + float(sample.value)
        return out

    def labelled(self, name: str) -> dict[tuple[tuple[str, str], ...], float]:
        text = httpx.get(self.url + "/metrics", timeout=10).text
        return {
            tuple(sorted(s.labels.items())): float(s.value)
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == name
        }

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def start_vllm(model: Path, flags: Sequence[str], log_path: Path) -> VllmServer:
    """Start vLLM and return at once (`wait_vllm` waits): two can then load side by side."""
    port = free_port()
    argv = vllm_env.serve_argv(model, port, [*BASE_FLAGS, *flags])
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=vllm_env.engine_env({"PYTHONUNBUFFERED": "1"}),
            process_group=0,  # its own group: stopping it stops its engine-core process
        )
    return VllmServer(f"http://127.0.0.1:{port}", process, log_path)


def wait_vllm(server: VllmServer, timeout_s: float = START_TIMEOUT_S) -> VllmServer:
    problem = wait_healthy(server.url, server.process, timeout_s, f"vLLM {server.url}")
    if problem is not None:
        server.stop()
        raise RuntimeError(f"{problem}:\n{server.output()[-6000:]}")
    return server


@contextlib.contextmanager
def run_vllm(model: Path, flags: Sequence[str], log_path: Path) -> Iterator[VllmServer]:
    server = wait_vllm(start_vllm(model, flags, log_path))
    try:
        yield server
    finally:
        server.stop()


def model_listed(agent: AgentProcess) -> bool:
    """The agent has read the engine's model list (it refuses requests for unknown models)."""
    response = httpx.get(agent.url + "/v1/models", headers=AUTH, timeout=5)
    return response.status_code == 200 and any(
        m["id"] == MODEL_NAME for m in response.json()["data"]
    )


@contextlib.contextmanager
def standalone_gateway(
    tmp: Path, engine_url: str, config: dict[str, Any], keys: list[dict[str, Any]] | None = None
) -> Iterator[AgentProcess]:
    """`python -m gpu_agent --engine-url ... --tier-config ... --keys ...`, ready for requests."""
    tmp.mkdir(parents=True, exist_ok=True)
    args = standalone_args(tmp, engine_url, config)
    if keys is not None:
        write_json(tmp / "keys.json", keys)
    with start_agent(args, tmp / "agent.log") as agent:
        wait_for(lambda: model_listed(agent), 60, "the agent to list vLLM's model")
        yield agent


async def stream_to_end(
    client: httpx.AsyncClient, agent: AgentProcess, tier: str, max_tokens: int, prompt: str
) -> float:
    """One streamed completion through the gateway in `tier`; returns when it ended."""
    headers = {**AUTH, "X-Tiergate-Tier": tier}
    body = {
        "model": MODEL_NAME,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "stream": True,
        **NO_EOS,
    }
    url = agent.url + "/v1/completions"
    async with client.stream("POST", url, json=body, headers=headers) as response:
        text = (await response.aread()).decode()
    assert response.status_code == 200, text
    assert '"error"' not in text, text
    assert text.rstrip().endswith("data: [DONE]"), text[-500:]
    return time.monotonic()


async def engine_load(client: httpx.AsyncClient, engine: VllmServer) -> tuple[int, int]:
    """vLLM's (running, waiting) from its /metrics."""
    text = (await client.get(engine.url + "/metrics")).text
    found = {"vllm:num_requests_running": 0.0, "vllm:num_requests_waiting": 0.0}
    for family in text_string_to_metric_families(text):
        if family.name in found:
            found[family.name] = sum(s.value for s in family.samples)
    return int(found["vllm:num_requests_running"]), int(found["vllm:num_requests_waiting"])


async def gateway_depth(client: httpx.AsyncClient, agent: AgentProcess, tier: str) -> int:
    text = (await client.get(agent.url + "/metrics")).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "tiergate_queue_depth" and sample.labels.get("tier") == tier:
                return int(sample.value)
    return 0


async def offline_finishing_after_online(
    agent: AgentProcess, engine: VllmServer, *, offline: int = 6, offline_tokens: int = 40
) -> int:
    """Send `offline` long offline requests, wait until all but the engine's running ones are
    queued (in the gateway or in vLLM), then one short online request: how many of the
    offline requests, all sent before it, ended after it."""
    async with httpx.AsyncClient(timeout=600) as client:
        tasks = [
            asyncio.create_task(
                stream_to_end(client, agent, "offline", offline_tokens, f"offline {i} text")
            )
            for i in range(offline)
        ]
        deadline = time.monotonic() + 120
        while True:
            running, waiting = await engine_load(client, engine)
            held = await gateway_depth(client, agent, "offline")
            if running >= 2 and running + waiting + held >= offline:
                break
            assert time.monotonic() < deadline, f"no backlog: {running=} {waiting=} {held=}"
            assert not any(t.done() for t in tasks), "an offline request ended before the backlog"
            await asyncio.sleep(0.02)
        online_end = await stream_to_end(client, agent, "online", 4, "online question")
        offline_ends = await asyncio.gather(*tasks)
    return sum(1 for end in offline_ends if end > online_end)


class ThreadedConsole:
    """tests.agent's FakeConsole on an event loop of its own thread, so that session- and
    module-scoped fixtures can share it and plain tests can wait on its beats."""

    def __init__(self, **fields: Any) -> None:
        self.fake = FakeConsole(**fields)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> FakeConsole:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.fake.start(), self._loop).result(10)
        return self.fake

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.fake.stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def wait_beat(
    console: FakeConsole, predicate: Callable[[dict[str, Any]], Any], timeout_s: float, what: str
) -> dict[str, Any]:
    """The first beat from now on that satisfies `predicate` (a plain, blocking wait)."""
    seen = len(console.beats)

    def found() -> dict[str, Any] | None:
        nonlocal seen
        beats = console.beats[seen:]
        seen += len(beats)
        return next((b for b in beats if predicate(b)), None)

    try:
        return wait_for(found, timeout_s, what, poll=0.1)
    except AssertionError:
        last = console.beats[-1] if console.beats else None
        raise AssertionError(f"no heartbeat with {what}; last: {json.dumps(last)[:3000]}") from None
