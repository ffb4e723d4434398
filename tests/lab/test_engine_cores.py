"""`lab.headline --engine-cores`: where a real vLLM's threads go (tools/vllm_env.engine_cpus),
and how its OpenMP threads wait in each layout."""

from __future__ import annotations

import os

import pytest

from lab.headline.__main__ import build_parser
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
