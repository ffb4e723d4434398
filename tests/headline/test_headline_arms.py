"""The headline experiment's arms run end to end: a fresh simulated engine per arm, the
gateway as a real process, the same seeded workload, and a record with every tier's figures.

Only behaviour is asserted, nothing a loaded machine can move: every request sent completes
without error, the gateway sheds nothing (the seed sets no queue limits), and each tier has its
row. How much the gateway cuts online TTFT P99 is a measurement, not a test: `python manage.py
headline` (docs/performance.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.bench.headline.arms import Setup, run_arm
from console.bench.headline.catalog import standard_arms
from console.bench.headline.workload import TIERS, records_needed, write_prompts

RATE = 32.0  # past the simulated engine's saturation point (~26 req/s for this workload)
DURATION_S = 4.0
WARMUP_S = 1.0


@pytest.mark.slow
def test_the_fcfs_and_gateway_arms_complete_every_request(tmp_path: Path) -> None:
    prompts = write_prompts(
        tmp_path / "prompts.jsonl", records_needed(RATE, DURATION_S + WARMUP_S), seed=3
    )
    setup = Setup(RATE, DURATION_S, WARMUP_S, 3, 1.0, prompts, tmp_path)
    arms = {arm.key: arm for arm in standard_arms()}
    fcfs = run_arm(arms["a"], setup)
    gateway = run_arm(arms["c"], setup)

    for outcome in (fcfs, gateway):
        samples = outcome.result.samples
        assert samples and all(s.ok for s in samples), outcome.result.summary
        overall = outcome.tier_row("overall")
        assert overall["errors"] == 0 and overall["completed"] == overall["requests"] > 0
        for tier in TIERS:
            row = outcome.tier_row(tier)
            assert row["completed"] > 0 and row["ttft_p99_ms"] is not None, (tier, row)
        assert outcome.to_json()["tiers"].keys() == {*TIERS, "overall"}
        # Tokens streamed in the window: some, and no more than every request's output.
        streamed = overall["tokens_in_window_tps"] * outcome.duration_s
        assert 0 < streamed <= sum(s.output_tokens or 0 for s in samples)
    assert not fcfs.arm.via_gateway and gateway.arm.via_gateway
    # The gateway reorders, it does not shed: no queue limits in seed 000.
    assert gateway.tier_row("overall")["rejected"] == 0
    assert gateway.engine["gateway_queues"] is not None
    # Each arm leaves its once-a-second trace: the engine's gauges, and the gateway's queues,
    # awaiting limit and reserved slots, timestamped inside the arm's run.
    trace = json.loads((tmp_path / f"{gateway.arm.name}-trace.json").read_text())
    start, end = gateway.result.started_at, gateway.result.finished_at
    assert len(trace["engine"]) >= DURATION_S and len(trace["gateway"]) >= DURATION_S
    assert all(start - 1 <= p["t"] <= end + 1 for p in trace["engine"])
    point = trace["gateway"][-1]
    assert start - 1 <= point["t"][""] <= end + 1
    assert point["limit"][""] >= 1 and "online" in point["queued"]
    assert "reserved" in point
    assert json.loads((tmp_path / f"{fcfs.arm.name}-trace.json").read_text())["gateway"] is None
