"""Fixtures for the real-engine tests: the tiny model, one vLLM per configuration for the
whole session, and the cores they run on.

vLLM keeps to core 0 (tools/vllm_env.py pins it); this test process, the gateways it starts
and their clients keep to core 1, so a client is not timed while vLLM's threads hold its core.
Without the environment (`make vllm-env`) every test here fails with the command to run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_agent.testing import AgentProcess
from tests.agent.agent_helpers import tier_config
from tests.vllm.vllm_helpers import VllmServer, run_vllm, standalone_gateway
from tools import vllm_env

# Two sequences at a time: a handful of requests is enough to fill vLLM's waiting queue.
SEQS = ("--max-num-seqs", "2")


@pytest.fixture(scope="session", autouse=True)
def _clients_off_the_engine_core() -> Iterator[None]:
    before = os.sched_getaffinity(0)
    cpus = vllm_env.engine_cpus()
    rest = before - {int(c) for c in cpus.split(",")} if cpus else before
    if rest:
        os.sched_setaffinity(0, rest)
    yield
    os.sched_setaffinity(0, before)


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    vllm_env.require()  # EnvMissing names `make vllm-env`: a failure, never a skip
    return vllm_env.ensure_model()


@pytest.fixture(scope="session")
def vllm_priority(
    tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VllmServer]:
    """vLLM with `--scheduling-policy priority`, shared by every test that reads it."""
    log = tmp_path_factory.mktemp("vllm-priority") / "vllm.log"
    with run_vllm(tiny_model, [*SEQS, "--scheduling-policy", "priority"], log) as server:
        yield server


@pytest.fixture(scope="session")
def vllm_fcfs(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """The same vLLM with its default first-come-first-served queue."""
    log = tmp_path_factory.mktemp("vllm-fcfs") / "vllm.log"
    with run_vllm(tiny_model, [*SEQS, "--scheduling-policy", "fcfs"], log) as server:
        yield server


@pytest.fixture(scope="session")
def gateway(
    vllm_priority: VllmServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AgentProcess]:
    """A standalone agent with roomy tiers in front of the priority vLLM."""
    config = tier_config({"pass_priority": True})
    with standalone_gateway(tmp_path_factory.mktemp("gateway"), vllm_priority.url, config) as a:
        yield a
