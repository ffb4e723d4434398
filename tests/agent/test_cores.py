"""gpu_agent.cores: whether a managed CPU vLLM's OpenMP threads leave the agent a core, read
from the environment the engine inherits; the agent says so in its log, its status and the
heartbeat's engine (docs/gateway.md, "Sharing cores with the engine")."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from gpu_agent.cores import BIND, RESERVED, WAIT_POLICY, engine_cores, parse_cpus, span
from gpu_agent.sim.testing import free_port
from gpu_agent.testing import start_agent_process
from tests.agent.agent_helpers import NODE_TOKEN, tier_config


def test_core_lists_are_read_as_vllm_writes_them() -> None:
    assert parse_cpus("0") == {0}
    assert parse_cpus("0-3,5|6-7") == {0, 1, 2, 3, 5, 6, 7}
    for bad in ("", "0,,1", "3-1", "a", "-1", "0|"):
        with pytest.raises(ValueError):
            parse_cpus(bad)


@pytest.mark.parametrize(
    ("env", "leaves"),
    [
        ({}, True),  # vLLM's default, auto: one core reserved a rank
        ({BIND: "auto"}, True),
        ({BIND: "auto", RESERVED: "2"}, True),
        ({BIND: "auto", RESERVED: "0"}, False),
        ({BIND: "0-2"}, True),
        ({BIND: "0-1|2"}, True),
        ({BIND: "0-3"}, False),
        ({BIND: "0,1|2-3"}, False),
        ({BIND: "0-7"}, False),  # more than the agent has still holds all of them
        ({BIND: "nobind"}, False),  # unbound threads, one a core
        ({BIND: "nobind", "OMP_NUM_THREADS": "3"}, True),
    ],
)
def test_whether_the_binding_leaves_the_agent_a_core(env: dict[str, str], leaves: bool) -> None:
    cores = engine_cores(env, {0, 1, 2, 3})
    assert cores["leaves_agent_a_core"] is leaves
    assert (cores["warning"] is None) is leaves
    if not leaves:
        assert cores["warning"].startswith(f"{BIND}=")
        assert "cores 0-3:" in cores["warning"] and "Leave one core out" in cores["warning"]
    # Threads that hold every core wait passively; an engine that leaves one keeps its own.
    assert cores["engine_env"] == ({} if leaves else {WAIT_POLICY: "PASSIVE"})
    if not leaves:
        assert f"starts with {WAIT_POLICY}=PASSIVE" in cores["warning"]


def test_cores_are_named_as_ranges_so_a_large_nodes_warning_stays_short() -> None:
    assert span(set()) == "" and span({3}) == "3"
    assert span({0, 1, 2, 3, 5, 7, 8}) == "0-3,5,7-8"
    assert parse_cpus(span({0, 1, 2, 3, 5, 7, 8})) == {0, 1, 2, 3, 5, 7, 8}  # vLLM's notation
    node = set(range(256))
    cores = engine_cores({BIND: "0-255"}, node)
    assert "none of its cores 0-255:" in cores["warning"]
    # the heartbeat's engine.cores_warning is at most 1000 characters (console/fleet/schemas.py)
    assert len(cores["warning"]) < 1000
    scattered = engine_cores({BIND: "0-511"}, set(range(0, 512, 2)))["warning"]
    assert "none of its cores (256, from 0 to 510):" in scattered and len(scattered) < 1000


def test_an_operators_wait_policy_is_kept() -> None:
    cores = engine_cores({BIND: "0-3", WAIT_POLICY: "active"}, {0, 1, 2, 3})
    assert cores["leaves_agent_a_core"] is False and cores["engine_env"] == {}
    assert cores["warning"].endswith(f"; {WAIT_POLICY}='active' is the operator's")


def test_an_unreadable_binding_and_a_single_core() -> None:
    cores = engine_cores({BIND: "zero"}, {0, 1})
    assert cores["leaves_agent_a_core"] is None
    assert cores["warning"] == f"{BIND}='zero' is not a core list vLLM reads"
    alone = engine_cores({BIND: "0"}, {0})
    assert alone["leaves_agent_a_core"] is False and alone["warning"] is None
    assert cores["engine_env"] == {} and alone["engine_env"] == {}  # one core: nothing to share


def test_the_agent_reports_an_engine_that_holds_every_core(tmp_path: Path) -> None:
    # A real agent in managed mode running an engine command that is not the simulator
    # flag's (so the check applies), with the binding an operator would set from vLLM's docs
    # for a whole node: every core of the agent's.
    every = ",".join(map(str, sorted(os.sched_getaffinity(0))))
    port = free_port()
    engine = [sys.executable, "-m", "gpu_agent.sim", "serve", "demo", "--port", str(port),
              "--sim-preset", "tiny-test"]  # fmt: skip
    config = tmp_path / "tiers.json"
    config.write_text(json.dumps(tier_config()), encoding="utf-8")
    keys = tmp_path / "keys.json"
    keys.write_text("[]", encoding="utf-8")
    args = ["--engine-cmd", " ".join(engine), "--tier-config", str(config), "--keys", str(keys),
            "--node-token", NODE_TOKEN, "--engine-start-timeout", "20"]  # fmt: skip
    env = {BIND: every}
    with start_agent_process(args, tmp_path / "agent.log", env=env, node_token=NODE_TOKEN) as a:
        status = a.status()
        cores = status["cores"]["binding"]
        assert cores["omp_bind"] == every and cores["leaves_agent_a_core"] is False
        assert status["engine"]["cores_warning"] == cores["warning"]
        assert f"engine cores: {BIND}='{every}'" in a.output()
        # and started the engine with its OpenMP threads waiting passively (read from the
        # engine process's own environment)
        assert cores["engine_env"] == {WAIT_POLICY: "PASSIVE"}
        assert _environ(status["engine"]["pid"]).get(WAIT_POLICY) == "PASSIVE"
    with start_agent_process(args, tmp_path / "agent2.log", node_token=NODE_TOKEN,
                             env={BIND: "auto"}) as a:  # fmt: skip
        status = a.status()
        assert status["cores"]["binding"]["leaves_agent_a_core"] is True
        assert status["engine"]["cores_warning"] is None
        assert "engine cores:" not in a.output()
        assert WAIT_POLICY not in _environ(status["engine"]["pid"])


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().partition("=")[::2] for item in raw if b"=" in item)
