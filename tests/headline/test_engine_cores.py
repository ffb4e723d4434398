"""`perf.headline --engine-cores`: where a real vLLM's threads go (tools/vllm_env.engine_cpus)."""

from __future__ import annotations

import os

import pytest

from perf.headline.__main__ import build_parser
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
