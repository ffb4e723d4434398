"""The headline effect, short: through the gateway with seed 000's tiers, online TTFT P99
stays well below FCFS-direct's on the same saturating mixed workload.

Two real arms of perf.headline (fresh simulated engine each, the gateway as a real process),
8 measured seconds each at a rate past the engine's saturation point (~26 req/s for this
workload on the simulated H100: docs/performance.md, "Headline"), so that the FCFS queue
grows during the window. Margins are wide for a noisy 2-core machine: the full-length run
measures a ratio of several times, the test asks for a third less.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from perf.headline.arms import Setup, run_arm, standard_arms
from perf.headline.workload import records_needed, write_prompts

RATE = 32.0
DURATION_S = 8.0
WARMUP_S = 1.0


@pytest.mark.slow
def test_gateway_cuts_online_ttft_p99_against_fcfs_direct(tmp_path: Path) -> None:
    prompts = write_prompts(
        tmp_path / "prompts.jsonl", records_needed(RATE, DURATION_S + WARMUP_S), seed=3
    )
    setup = Setup(RATE, DURATION_S, WARMUP_S, 3, 1.0, prompts, tmp_path)
    arms = {arm.key: arm for arm in standard_arms()}
    fcfs = run_arm(arms["a"], setup)
    gateway = run_arm(arms["c"], setup)

    for outcome in (fcfs, gateway):
        overall = outcome.tier_row("overall")
        assert overall["errors"] == 0, outcome.result.summary
        assert overall["requests"] >= 0.6 * RATE * DURATION_S
        # The engine was the bottleneck (requests queued in it, or in front of it).
        assert outcome.engine["engine_running"]["max"] >= 24

    fcfs_p99 = fcfs.tier_row("online")["ttft_p99_ms"]
    gw_p99 = gateway.tier_row("online")["ttft_p99_ms"]
    assert fcfs_p99 is not None and gw_p99 is not None
    assert gw_p99 < 0.67 * fcfs_p99, (gw_p99, fcfs_p99)
    # Same work done: the gateway reorders, it does not shed (no queue limits in the seed).
    assert gateway.tier_row("overall")["rejected"] == 0
    done = (gateway.tier_row("overall")["completed"], fcfs.tier_row("overall")["completed"])
    assert abs(done[0] - done[1]) <= 2, done
