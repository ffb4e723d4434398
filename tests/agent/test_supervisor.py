"""Managed mode: the agent runs the engine (the simulator standing in for `vllm serve`),
restarts it for a new launch profile, and goes back to the old one when the new one fails."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import pytest

from gpu_agent.sim.testing import free_port
from gpu_agent.supervisor import DEFAULT_ENGINE_NICE
from tests.agent.agent_helpers import (
    GATEWAY_KEYS,
    NODE_TOKEN,
    FakeConsole,
    assert_niceness_acts,
    post,
    standalone_args,
    start_agent,
    tier_config,
)
from tests.waiting import wait_for


async def test_it_restarts_the_engine_for_a_profile_and_rolls_back_a_bad_one(
    console: FakeConsole, tmp_path: Path
) -> None:
    port = free_port()
    base = ["vllm", "serve", "demo", "--port", str(port), "--sim-preset", "tiny-test"]
    console.keys_version, console.gateway_keys = "k1", GATEWAY_KEYS
    args = [
        "--engine-cmd",
        " ".join([*base, "--max-num-seqs", "8"]),
        "--simulate",
        "--console",
        console.url,
        "--node-token",
        NODE_TOKEN,
        "--state-dir",
        str(tmp_path / "state"),
        "--engine-start-timeout",
        "20",
    ]
    agent = await asyncio.to_thread(start_agent, args, tmp_path / "agent.log")
    try:
        beat = await console.wait_beat(
            lambda b: b["health"]["engine"] == "ok" and b["keys_version"] == "k1",
            what="the engine up",
        )
        assert beat["mode"] == "managed"
        assert beat["engine"]["url"] == f"http://127.0.0.1:{port}"
        assert beat["engine"]["args"]["max_num_seqs"] == 8
        assert (await post(agent)).status_code == 200

        console.launch_profile = {
            "id": 1,
            "name": "wider",
            "args": {"max_num_seqs": 16},
            "argv": [*base, "--max-num-seqs", "16"],
        }
        beat = await console.wait_beat(
            lambda b: b["applied"]["launch_profile"] == 1 and b["health"]["engine"] == "ok",
            timeout=20,
            what="profile 1 applied",
        )
        assert beat["engine"]["args"]["max_num_seqs"] == 16
        assert (await post(agent)).status_code == 200

        console.launch_profile = {
            "id": 2,
            "name": "broken",
            "args": {},
            "argv": [*base, "--max-num-seqs", "32", "--no-such-flag"],
        }
        beat = await console.wait_beat(
            lambda b: "launch_profile" in b.get("apply_errors", {}),
            timeout=20,
            what="profile 2 refused",
        )
        error = beat["apply_errors"]["launch_profile"]
        assert error["version"] == 2
        assert "exited with code" in error["error"] and "--no-such-flag" in error["error"]
        beat = await console.wait_beat(lambda b: b["health"]["engine"] == "ok", timeout=20)
        assert beat["applied"]["launch_profile"] == 1
        assert beat["engine"]["args"]["max_num_seqs"] == 16
        assert (await post(agent)).status_code == 200

        # An engine that dies on its own is started again with the applied profile.
        pid = (await asyncio.to_thread(agent.status))["engine"]["pid"]
        os.kill(pid, signal.SIGKILL)
        await console.wait_beat(lambda b: b["health"]["engine"] != "ok", what="engine down")
        beat = await console.wait_beat(lambda b: b["health"]["engine"] == "ok", timeout=20)
        status = await asyncio.to_thread(agent.status)
        assert status["engine"]["pid"] != pid and status["engine"]["args"]["max_num_seqs"] == 16
        assert (await post(agent)).status_code == 200
    finally:
        await asyncio.to_thread(agent.stop)


def test_the_engine_does_not_outlive_a_killed_agent(tmp_path: Path) -> None:
    port = free_port()
    args = [
        "--engine-cmd",
        f"vllm serve demo --port {port} --sim-preset tiny-test",
        "--simulate",
        *standalone_args(tmp_path, "unused", tier_config())[2:],
    ]
    agent = start_agent(args, tmp_path / "agent.log")
    try:
        pid = wait_for(lambda: agent.status()["engine"]["pid"], what="the engine's pid")
        wait_for(lambda: agent.status()["health"]["engine"] == "ok", timeout=20, what="engine up")
        agent.process.kill()
        agent.process.wait()
        wait_for(lambda: not Path(f"/proc/{pid}").exists() or _zombie(pid), what="engine gone")
    finally:
        agent.stop()


@pytest.mark.parametrize(
    ("flags", "steps"), [([], DEFAULT_ENGINE_NICE), (["--engine-nice", "3"], 3)]
)
def test_the_engine_runs_nicer_than_the_agent(tmp_path: Path, flags: list[str], steps: int) -> None:
    """Every thread of the engine, as the kernel sees it, `steps` nicer than the agent (at
    most 19: the tests themselves may run niced)."""
    port = free_port()
    args = [
        "--engine-cmd",
        f"vllm serve demo --port {port} --sim-preset tiny-test",
        "--simulate",
        *flags,
        *standalone_args(tmp_path, "unused", tier_config())[2:],
    ]
    with start_agent(args, tmp_path / "agent.log") as agent:
        pid = wait_for(lambda: agent.status()["engine"]["pid"], what="the engine's pid")
        wait_for(lambda: agent.status()["health"]["engine"] == "ok", timeout=20, what="engine up")
        expected = min(19, os.getpriority(os.PRIO_PROCESS, agent.process.pid) + steps)
        threads = [int(t.name) for t in Path(f"/proc/{pid}/task").iterdir()]
        niceness = {tid: os.getpriority(os.PRIO_PROCESS, tid) for tid in threads}
        assert niceness == dict.fromkeys(threads, expected)
        assert_niceness_acts(pid, agent.process.pid)


def _zombie(pid: int) -> bool:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    return True
