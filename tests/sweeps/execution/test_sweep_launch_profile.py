"""A launch-profile sweep restarts the engine through the agent's supervisor for every trial,
waits for its health, and finds the value a hand calculation predicts; the node ends on its
base profile, running the base's flags again."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sweeps.execution.sweep_helpers import (
    MODEL,
    SIM_FLAGS,
    by_value,
    describe,
    make_sweep,
    tier_config,
    wait_finished,
)

pytestmark = pytest.mark.slow


def test_a_launch_profile_sweep_restarts_the_engine_and_finds_the_predicted_max_num_seqs(
    celery_worker_proc: Any, swept_node: Any
) -> None:
    """The engine is the agent's own simulator, started by its supervisor from the launch
    profile; its steps take about 20 ms whatever the batch, so a request of 8 output tokens
    takes ~165 ms. The tier config sets no max_in_flight, so the gateway's cap follows the
    engine's max_num_seqs, and the engine runs max_num_seqs requests at once out of the 16
    clients': throughput = max_num_seqs / 0.165 s, i.e. 1 -> ~6, 4 -> ~24, 16 -> ~97 req/s.
    The lowest online TTFT P99 goes the same way (a request waits behind the 16 - n others
    queued, (16 - n) / n x 165 ms: 1 -> ~2.5 s, 4 -> ~0.5 s, 16 -> one step or two), so the
    sweep must choose max_num_seqs 16.

    max_num_seqs 10000 passes the console's checks (the profile names no max_num_batched_tokens)
    but the engine refuses it at start (its default 8192 batched tokens is below it): the
    supervisor goes back to the engine it ran and reports the error, and that one trial fails
    with the engine's words while the sweep goes on and ends on the base."""
    from console.bench.models import BenchmarkRun
    from console.bench.sweeps.choices import Objective, SweepKind

    base_args = {"model": MODEL, "max_num_seqs": 2, "extra_args": list(SIM_FLAGS)}
    swept = swept_node(tier_config(), launch_args=base_args)
    sweep = make_sweep(
        swept,
        kind=SweepKind.LAUNCH_PROFILE,
        variables=[{"path": "max_num_seqs", "values": [1, 4, 16, 10000]}],
        objective=Objective.MIN_ONLINE_TTFT_P99,
    )
    sweep = wait_finished(sweep, timeout=180)
    info = describe(sweep)
    assert sweep.status == "succeeded", info
    trials = by_value(sweep, "max_num_seqs")
    assert set(trials) == {"base", 1, 4, 16, 10000}, info
    refused = trials.pop(10000)
    assert refused.status == "failed" and refused.series_id is None, info
    assert "engine exited" in refused.error and "max_num_seqs (10000)" in refused.error, info
    assert all(t.status == "succeeded" and t.feasible for t in trials.values()), info
    assert sweep.best_trial_id == trials[16].pk, info
    p99 = {v: t.metrics["ttft_p99_ms"]["online"] for v, t in trials.items()}
    rps = {v: t.metrics["throughput_rps"] for v, t in trials.items()}
    assert p99[1] > 2 * p99[4] and p99[4] > 1.5 * p99[16], info
    assert rps[4] > 2.5 * rps[1] and rps[16] > 1.8 * rps[4], info
    # Each trial's runs were measured against the engine the trial's profile started.
    for value, trial in trials.items():
        run = BenchmarkRun.objects.get(series=trial.series)
        node_snap = run.config_snapshot["nodes"][0]
        assert node_snap["launch_profile"]["id"] == trial.launch_profile_id, info
        expected = 2 if value == "base" else value
        assert node_snap["engine"]["args"]["max_num_seqs"] == expected, (value, node_snap)
    # Back on the base profile, its engine restarted and healthy.
    assert sweep.restored, info
    node = swept.reload()
    assert node.desired_launch_profile_id == swept.launch_profile.pk
    assert node.applied_launch_profile_id == swept.launch_profile.pk
    assert swept.agent.status()["engine"]["args"]["max_num_seqs"] == 2
    assert node.health["engine"] == "ok"
