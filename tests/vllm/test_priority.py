"""Online requests overtake queued offline ones end to end, on a real vLLM.

vLLM runs two sequences at a time (conftest.SEQS), so six long offline requests make a backlog
and one short online request sent after them shows who orders it:
- the gateway holding the backlog itself (max_in_flight 2): online goes next, whatever the
  engine's policy;
- the gateway letting everything through with vLLM's `priority` set per tier: vLLM's priority
  queue puts online first; the same config in front of an fcfs vLLM leaves it behind the
  queue, so the priority field is what did it.
Assertions count finishing order, not milliseconds, so a loaded machine does not decide them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent.agent_helpers import tier_config
from tests.vllm.vllm_helpers import (
    TIMEOUT,
    VllmServer,
    offline_finishing_after_online,
    standalone_gateway,
)

pytestmark = [pytest.mark.vllm, TIMEOUT]

OFFLINE = 6
HELD = tier_config({"max_in_flight": 2, "max_awaiting_first_token": 2, "pass_priority": True})
PASS_THROUGH = tier_config(
    {"max_in_flight": 64, "max_awaiting_first_token": 64, "pass_priority": True}
)


async def run(tmp: Path, engine: VllmServer, config: dict) -> int:  # type: ignore[type-arg]
    with standalone_gateway(tmp, engine.url, config) as agent:
        return await offline_finishing_after_online(agent, engine, offline=OFFLINE)


async def test_the_gateway_holding_the_backlog_lets_online_overtake(
    vllm_priority: VllmServer, tmp_path: Path
) -> None:
    # Two offline requests run when online arrives; the four queued in the gateway end after it.
    assert await run(tmp_path, vllm_priority, HELD) >= OFFLINE - 3


async def test_the_held_backlog_works_the_same_on_an_fcfs_engine(
    vllm_fcfs: VllmServer, tmp_path: Path
) -> None:
    assert await run(tmp_path, vllm_fcfs, HELD) >= OFFLINE - 3


async def test_vllm_priority_passed_by_the_gateway_lets_online_overtake(
    vllm_priority: VllmServer, tmp_path: Path
) -> None:
    assert await run(tmp_path, vllm_priority, PASS_THROUGH) >= OFFLINE - 3


async def test_an_fcfs_engine_keeps_online_behind_the_queue(
    vllm_fcfs: VllmServer, tmp_path: Path
) -> None:
    # The control: same gateway config, no priority queue in the engine. Online runs beside the
    # last offline request at best.
    assert await run(tmp_path, vllm_fcfs, PASS_THROUGH) <= 1
