"""vLLM's own core layout on a real vLLM: left to `VLLM_CPU_OMP_THREADS_BIND=auto`, it binds its
worker's OpenMP threads one to a core and reserves the last core for its other processes,
which may still run anywhere. An attached agent keeps off the bound cores and takes them away
from every other thread of vLLM's (`--fence-engine-helpers`, on by default), and gives them
back when it stops (docs/gateway.md, "Keeping off the engine's cores").

This module starts its own vLLM with no pinning, and it and the agent with every core of this
process's, not only the clients' core the session keeps to (tests/vllm/conftest.py).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_agent.cores import bound_cores, cpus_allowed, process_tree
from gpu_agent.testing import AgentProcess
from tests.agent.agent_helpers import tier_config
from tests.vllm.vllm_helpers import TIMEOUT, VllmServer, run_vllm, standalone_gateway
from tests.waiting import wait_for

pytestmark = [pytest.mark.vllm, TIMEOUT]

ALL = set(range(os.cpu_count() or 1))


@contextlib.contextmanager
def _every_core() -> Iterator[None]:
    """This process on every core while it starts a child (the child keeps them)."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, ALL)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def _threads(pid: int) -> dict[int, set[int] | None]:
    """Every thread of `pid`'s process tree, with the cores it may run on."""
    out = {}
    for p in process_tree(pid):
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{p}/task"):
                with contextlib.suppress(OSError):
                    out[int(tid)] = cpus_allowed(Path(f"/proc/{p}/task/{tid}/status").read_text())
    return out


@pytest.fixture(scope="module")
def vllm_auto(
    tiny_model: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch_module: None
) -> Iterator[VllmServer]:
    log = tmp_path_factory.mktemp("vllm-auto") / "vllm.log"
    with _every_core(), run_vllm(tiny_model, ["--max-num-seqs", "2"], log) as server:
        yield server


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[None]:
    """No pinning for the module's vLLM: its own binding decides (tools/vllm_env.engine_cpus)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIERGATE_VLLM_CPUS", "")
        yield


@pytest.mark.skipif(len(ALL) < 2, reason="vLLM's auto binding reserves a core: needs two")
def test_an_attached_agent_takes_the_openmp_cores_from_vllms_other_threads(
    vllm_auto: VllmServer, tmp_path: Path
) -> None:
    pid = vllm_auto.process.pid
    bound = bound_cores(pid)
    assert bound and bound < ALL, f"vLLM's auto binding left {bound}"  # OpenMP, reserved rest
    before = _threads(pid)
    helpers = [t for t, cpus in before.items() if cpus and len(cpus) > 1]
    assert helpers, "vLLM's API server and engine-core process run on every core"
    config = tier_config({"pass_priority": True})
    with _every_core(), standalone_gateway(tmp_path, vllm_auto.url, config) as agent:
        cores = wait_for(
            lambda: (c := _status_cores(agent))["engine_helpers_on"] and c,
            30,
            "the agent to move vLLM's helpers",
        )
        assert cores["engine_bound"] == sorted(bound)
        assert cores["agent_cpus"] == cores["engine_helpers_on"] == sorted(ALL - bound)
        after = _threads(pid)
        for tid in helpers:  # every helper off the OpenMP cores, the bound threads untouched
            if tid in after:
                assert after[tid] == ALL - bound, (tid, after[tid])
        assert {t: c for t, c in after.items() if c and len(c) == 1 and c <= bound} == {
            t: c for t, c in before.items() if c and len(c) == 1 and c <= bound and t in after
        }
        assert "engine threads not bound to a core" in agent.output()
    back = _threads(pid)
    assert all(back[t] == before[t] for t in helpers if t in back)  # given back at the stop


def _status_cores(agent: AgentProcess) -> dict[str, object]:
    cores: dict[str, object] = agent.status()["cores"]
    return cores
