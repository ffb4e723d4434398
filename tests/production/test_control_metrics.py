"""The agent exports what the apply-error and stale-agent alerts read (docs/metrics.md)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from gpu_agent.sim.testing import run_sim_process
from gpu_agent.testing import AgentProcess
from tests.agent.agent_helpers import MODEL, NODE_TOKEN, FakeConsole


async def scrape(agent: AgentProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with httpx.AsyncClient(timeout=5) as client:
        text = (await client.get(agent.url + "/metrics")).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_apply_errors_and_heartbeats_are_exported(tmp_path: Path) -> None:
    console = FakeConsole(interval_s=0.2)
    # Two tiers with one priority: the agent cannot apply it.
    queue = {"max_batch_size": 1, "max_waiting_time_ms": 1, "max_tokens_per_batch": 99}
    bad = {"scheduler": {"queues": {"a": {**queue, "priority": 1}, "b": {**queue, "priority": 1}}}}
    console.tier_config = {"id": 7, "name": "bad", "config": bad}
    await console.start()
    started = time.time()
    try:
        with run_sim_process(MODEL) as engine_url:
            args = ["--engine-url", engine_url, "--console", console.url]
            args += ["--node-token", NODE_TOKEN, "--state-dir", str(tmp_path / "state")]
            with AgentProcess.spawn(args, tmp_path / "agent.log") as agent:
                await asyncio.to_thread(agent.wait_ready)
                await console.wait_beat(lambda b: "tier_config" in b.get("apply_errors", {}))
                samples = await scrape(agent)
                assert samples[("tiergate_apply_error", (("kind", "tier_config"),))] == 1
                assert samples[("tiergate_apply_error", (("kind", "launch_profile"),))] == 0
                last = samples[("tiergate_heartbeat_last_success_timestamp_seconds", ())]
                assert started <= last <= time.time()
                assert samples[("tiergate_heartbeat_consecutive_failures", ())] == 0
                # The console goes away: the timestamp stays, failures count up.
                await console.stop()
                await asyncio.sleep(0.5)  # a beat in flight at the stop lands or fails
                stopped = (await scrape(agent))[
                    ("tiergate_heartbeat_last_success_timestamp_seconds", ())
                ]
                assert stopped >= last
                failures = ("tiergate_heartbeat_consecutive_failures", ())
                deadline = time.monotonic() + 10
                while (samples := await scrape(agent))[failures] < 1:
                    assert time.monotonic() < deadline, "no failed beat counted"
                    await asyncio.sleep(0.1)
                assert samples[("tiergate_heartbeat_last_success_timestamp_seconds", ())] == stopped
    finally:
        await console.stop()
