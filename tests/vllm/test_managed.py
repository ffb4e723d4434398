"""Managed mode on a real vLLM: the supervisor starts it from the engine command line, a new
launch profile restarts it with the new flags, a profile vLLM refuses comes back as an apply
error in vLLM's words with the previous engine restored, and an engine killed mid-stream ends
the client's stream with an SSE error event.

The agent runs `vllm serve ...` exactly as on a GPU node: tools/vllm_env.py's wrapper is first
on its PATH. One agent (and so one vLLM) serves the module; the tests run in file order.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gpu_agent.sim.testing import free_port
from gpu_agent.supervisor import DEFAULT_ENGINE_NICE
from gpu_agent.testing import AgentProcess
from tests.agent.agent_helpers import GATEWAY_KEYS, NODE_TOKEN, FakeConsole, assert_niceness_acts
from tests.vllm.vllm_helpers import (
    AUTH,
    MODEL_NAME,
    NO_EOS,
    START_TIMEOUT_S,
    TIMEOUT,
    ThreadedConsole,
    wait_beat,
)
from tools import vllm_env

pytestmark = [pytest.mark.vllm, TIMEOUT]


def argv(model: Path, max_model_len: int, *extra: str) -> list[str]:
    return [
        "vllm", "serve", str(model),
        "--served-model-name", MODEL_NAME,
        "--max-model-len", str(max_model_len),
        "--max-num-seqs", "2",
        "--dtype", "bfloat16",
        *extra,
    ]  # fmt: skip


def profile(version: int, argv_: list[str]) -> dict[str, Any]:
    return {"id": version, "name": f"p{version}", "args": {}, "argv": argv_}


def engine_up(beat: dict[str, Any]) -> bool:
    return beat["health"]["engine"] == "ok"


def engine_threads(pid: int) -> list[int]:
    """The threads of every process in the engine's process group (the supervisor starts it
    in a group of its own: the API server, its engine core and their helpers)."""
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (proc / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[2]) == pid:  # field 5, the group
                    out += [int(t.name) for t in (proc / "task").iterdir()]
    return out


def served_max_model_len(beat: dict[str, Any]) -> int:
    models = httpx.get(beat["engine"]["url"] + "/v1/models", timeout=10).json()["data"]
    return int(models[0]["max_model_len"])


@pytest.fixture(scope="module")
def managed(
    tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[AgentProcess, FakeConsole]]:
    tmp = tmp_path_factory.mktemp("managed")
    command = [*argv(tiny_model, 2048), "--host", "127.0.0.1", "--port", str(free_port())]
    with ThreadedConsole(gateway_keys=GATEWAY_KEYS, keys_version="k1", interval_s=0.5) as console:
        args = [
            "--engine-cmd", " ".join(command),
            "--console", console.url,
            "--node-token", NODE_TOKEN,
            "--state-dir", str(tmp / "state"),
            "--engine-start-timeout", str(START_TIMEOUT_S),
        ]  # fmt: skip
        agent = AgentProcess.spawn(
            args, tmp / "agent.log", env=vllm_env.engine_env(), node_token=NODE_TOKEN
        )
        try:
            agent.wait_ready(60)
            wait_beat(console, engine_up, START_TIMEOUT_S, "the engine up")
            yield agent, console
        finally:
            agent.stop(timeout_s=60)


def test_the_supervisor_starts_vllm_from_the_engine_command(
    managed: tuple[AgentProcess, FakeConsole],
) -> None:
    agent, console = managed
    beat = wait_beat(console, engine_up, 30, "the engine up")
    assert beat["mode"] == "managed"
    assert beat["engine"]["args"]["max_model_len"] == 2048
    assert beat["engine"]["simulated"] is False
    assert served_max_model_len(beat) == 2048
    # Every thread of every process vLLM started (its engine core's OpenMP threads included)
    # runs --engine-nice's default steps nicer than the agent.
    threads = engine_threads(agent.status()["engine"]["pid"])
    assert len(threads) > 2
    agent_nice = os.getpriority(os.PRIO_PROCESS, agent.process.pid)
    niceness = {}
    for tid in threads:
        with contextlib.suppress(ProcessLookupError):  # a helper thread that has just ended
            niceness[tid] = os.getpriority(os.PRIO_PROCESS, tid)
    assert niceness == dict.fromkeys(niceness, min(19, agent_nice + DEFAULT_ENGINE_NICE))
    assert_niceness_acts(agent.status()["engine"]["pid"], agent.process.pid)
    # The engine report: vLLM's own parser, read with the Python of the `vllm` command.
    beat = wait_beat(console, lambda b: "report" in b["engine"], 600, "the engine report")
    report = beat["engine"]["report"]
    assert report["version"] == vllm_env.VLLM_VERSION, report.get("error")
    assert "--max-num-seqs" in {f for o in report["options"] for f in o["flags"]}
    reply = httpx.post(
        agent.url + "/v1/chat/completions",
        json={"model": MODEL_NAME, "messages": [{"role": "user", "content": "hi"}],
              "max_tokens": 3, **NO_EOS},
        headers=AUTH,
        timeout=120,
    )  # fmt: skip
    assert reply.status_code == 200, reply.text
    assert reply.json()["usage"]["completion_tokens"] == 3


def test_a_new_profile_restarts_vllm_with_its_flags_and_a_refused_one_is_rolled_back(
    managed: tuple[AgentProcess, FakeConsole], tiny_model: Path
) -> None:
    agent, console = managed
    console.launch_profile = profile(2, argv(tiny_model, 1024))
    beat = wait_beat(
        console,
        lambda b: b["applied"].get("launch_profile") == 2 and engine_up(b),
        2 * START_TIMEOUT_S,
        "profile 2 applied",
    )
    assert beat["engine"]["args"]["max_model_len"] == 1024
    assert served_max_model_len(beat) == 1024

    # vLLM's own parser refuses the flag; the agent says so in vLLM's words and goes back.
    console.launch_profile = profile(3, argv(tiny_model, 512, "--turbo-mode"))
    beat = wait_beat(
        console,
        lambda b: (b.get("apply_errors") or {}).get("launch_profile", {}).get("version") == 3,
        2 * START_TIMEOUT_S,
        "profile 3's apply error",
    )
    error = beat["apply_errors"]["launch_profile"]["error"]
    assert "unrecognized arguments: --turbo-mode" in error, error
    assert beat["applied"]["launch_profile"] == 2
    beat = wait_beat(console, engine_up, 2 * START_TIMEOUT_S, "the previous engine back")
    assert beat["applied"]["launch_profile"] == 2
    assert served_max_model_len(beat) == 1024
    assert agent.status()["engine"]["args"]["max_model_len"] == 1024


def test_vllm_killed_mid_stream_ends_the_stream_with_an_error_event(
    managed: tuple[AgentProcess, FakeConsole],
) -> None:
    agent, console = managed
    wait_beat(console, engine_up, 2 * START_TIMEOUT_S, "the engine up")
    pid = agent.status()["engine"]["pid"]
    body = {"model": MODEL_NAME, "prompt": "go on", "max_tokens": 1000, "stream": True, **NO_EOS}
    events: list[str] = []
    with (
        httpx.Client(timeout=120) as client,
        client.stream("POST", agent.url + "/v1/completions", json=body, headers=AUTH) as response,
    ):
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(line[6:])
            if len(events) == 5:
                os.killpg(pid, signal.SIGKILL)  # vLLM and its engine-core process
    # The break is an error event in OpenAI's shape, then [DONE] (gpu_agent/errors.py).
    parsed = [json.loads(e) if e != "[DONE]" else None for e in events]
    failed = [i for i, p in enumerate(parsed) if p is not None and "error" in p]
    assert failed, events[-3:]
    assert failed[0] >= 5 and events[failed[0] + 1 :] == ["[DONE]"], events[-3:]
    assert parsed[failed[0]]["error"]["message"]  # type: ignore[index]
