"""`manage.py headline --engine-nice`: vLLM runs as much nicer than the client and gateways as
the agent's supervisor would run it (console/bench/headline/procs.py, options.py)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pytest

from console.bench.headline.options import (
    ENGINE_NICE,
    add_experiment_arguments,
    add_vllm_arguments,
    vllm_from_args,
)
from console.bench.headline.procs import VllmEngine, run_engine
from gpu_agent.supervisor import DEFAULT_ENGINE_NICE
from tests.agent.agent_helpers import assert_niceness_acts


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_experiment_arguments(parser)
    add_vllm_arguments(parser)
    return parser


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
