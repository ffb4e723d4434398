"""`perf.headline --engine-cores`: where a real vLLM's threads go (tools/vllm_env.engine_cpus),
and `--engine-nice`: vLLM runs as much nicer than the client and gateways as the agent's
supervisor would run it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from console.bench.headline.options import ENGINE_NICE, vllm_from_args
from console.bench.headline.procs import VllmEngine, run_engine
from gpu_agent.supervisor import DEFAULT_ENGINE_NICE
from perf.headline.__main__ import build_parser
from tests.agent.agent_helpers import assert_niceness_acts
from tools import vllm_env


def test_engine_cores_default_to_a_core_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIERGATE_VLLM_CPUS", raising=False)
    assert build_parser().parse_args([]).engine_cores == "own"
    assert vllm_env.engine_cpus() == ("0" if (os.cpu_count() or 1) > 1 else "")


def test_shared_cores_are_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = build_parser().parse_args(["--engine", "vllm", "--engine-cores", "shared"])
    assert args.engine_cores == "shared"
    monkeypatch.setenv("TIERGATE_VLLM_CPUS", "0,1")
    assert vllm_env.engine_cpus() == "0,1"
    shim = vllm_env.SHIM.format(python="p", api_server="a", env={}, cpus=vllm_env.engine_cpus())
    assert "'0,1'" in shim  # the shim's default binding when the variable is not passed on
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--engine-cores", "half"])


@pytest.mark.parametrize("layout", vllm_env.LAYOUTS)
def test_each_layout_sets_the_cores_the_shim_binds(
    monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    monkeypatch.delenv("TIERGATE_VLLM_CPUS", raising=False)
    vllm_env.use_layout(layout)
    every = ",".join(map(str, sorted(os.sched_getaffinity(0))))
    default = "0" if (os.cpu_count() or 1) > 1 else ""
    assert vllm_env.engine_cpus() == {"own": default, "shared": every, "auto": ""}[layout]
    # auto: the shim pins nothing and leaves VLLM_CPU_OMP_THREADS_BIND unset, so vLLM binds its
    # OpenMP threads itself (its default "auto": every core but the ones it reserves).
    assert build_parser().parse_args(["--engine-cores", layout]).engine_cores == layout
    with pytest.raises(ValueError, match="one of own, shared, auto"):
        vllm_env.use_layout("half")


@pytest.mark.parametrize("layout", vllm_env.LAYOUTS)
def test_the_benchmarks_engine_waits_as_a_managed_one_does(
    monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    """A benchmark's vLLM gets what the agent adds to a managed engine's environment: the
    passive OpenMP wait policy where its threads hold every core (shared), nothing where vLLM
    or the layout leaves one (auto, own); an operator's own policy is kept."""
    for name in ("TIERGATE_VLLM_CPUS", "VLLM_CPU_OMP_THREADS_BIND", "OMP_WAIT_POLICY"):
        monkeypatch.delenv(name, raising=False)
    vllm_env.use_layout(layout)
    several = len(os.sched_getaffinity(0)) > 1
    env = vllm_env.engine_env()
    assert env.get("OMP_WAIT_POLICY") == ("PASSIVE" if layout == "shared" and several else None)
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert vllm_env.engine_env()["OMP_WAIT_POLICY"] == "ACTIVE"


def test_the_benchmark_nices_vllm_as_the_agent_does() -> None:
    assert ENGINE_NICE == DEFAULT_ENGINE_NICE
    vllm = ["--engine", "vllm", "--vllm-model", "m"]
    assert vllm_from_args(build_parser().parse_args(vllm)).nice == DEFAULT_ENGINE_NICE
    assert vllm_from_args(build_parser().parse_args([*vllm, "--engine-nice", "0"])).nice == 0
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--engine-nice", "20"])


def test_run_engine_starts_the_engine_that_much_nicer(tmp_path: Path) -> None:
    # The simulator takes vLLM's command line: `COMMAND serve MODEL --host --port FLAGS`.
    engine = VllmEngine(command=(sys.executable, "-m", "gpu_agent.sim"), model="demo", nice=3)
    with run_engine("demo", ["--sim-preset", "tiny-test"], tmp_path, "nice", engine) as url:
        port = f"--port\0{url.rsplit(':', 1)[1]}\0".encode()
        (pid,) = [p for p in _children() if port in _cmdline(p)]
        assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, os.nice(0) + 3)
        # In this process's session (its autogroup), where that niceness acts against the
        # client and the gateways; a process group of its own, so that it stops whole.
        assert_niceness_acts(pid, os.getpid())


def _children() -> list[int]:
    tasks = Path(f"/proc/{os.getpid()}/task")
    return [int(c) for t in tasks.iterdir() for c in (t / "children").read_text().split()]


def _cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()
