"""Builders for step-model tests: configs from real command lines, requests, a run loop."""

from __future__ import annotations

import zlib

from gpu_agent.sim.config import SimConfig, parse_args
from gpu_agent.sim.engine import Engine, SimRequest, StepResult
from gpu_agent.sim.tokens import encode


def config(*flags: str) -> SimConfig:
    return parse_args(["serve", "m", "--sim-preset", "tiny-test", *flags])


def words(count: int, salt: str = "") -> list[int]:
    """`count` prompt tokens; a salt makes the first word, hence every block hash, unique."""
    ids = encode(" ".join(f"{index % 10_000:04d}" for index in range(count)))
    if salt and ids:
        ids[0] = (1 << 40) + zlib.crc32(salt.encode())  # outside encode()'s CRC-32 range
    return ids


def request(
    name: str, prompt_tokens: int = 32, max_tokens: int = 16, priority: int = 0, salt: str = ""
) -> SimRequest:
    ids = words(prompt_tokens, salt or name)
    return SimRequest(name, ids, max_tokens, priority=priority, ignore_eos=True)


def run_until_done(engine: Engine, max_steps: int = 200_000) -> list[StepResult]:
    steps: list[StepResult] = []
    while engine.has_work():
        result = engine.step()
        assert result is not None, "work left but nothing scheduled"
        steps.append(result)
        assert len(steps) < max_steps, "engine does not converge"
    return steps


def ttft(req: SimRequest) -> float:
    assert req.first_token_time is not None
    return req.first_token_time - req.arrival_time
