"""A tier-config sweep, hot-applied through a real agent and run by a real Celery worker,
finds the value a hand calculation predicts, and leaves the node on its base."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sweeps.execution.sweep_helpers import (
    STEP_S,
    WORKLOAD,
    by_value,
    describe,
    make_sweep,
    tier_config,
    wait_finished,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.slow
PATH = "scheduler.admission.max_in_flight"


def test_a_hot_tier_config_sweep_finds_the_in_flight_cap_a_hand_calculation_predicts(
    celery_worker_proc: Any, swept_node: Any, operator: Any, api: Any
) -> None:
    """16 closed-loop clients send requests of 8 output tokens; the simulator's steps take
    about 20 ms whatever the batch, so a request takes 8 steps = ~165 ms however many run
    together. The gateway lets `max_in_flight` of them into the engine at once, so the node
    serves max_in_flight / 0.165 s: 1 -> ~6 req/s, 4 -> ~24 req/s, 16 -> ~97 req/s (the 16
    clients never exceed 16). The highest throughput is therefore max_in_flight 16, at about
    4x the throughput of 4, which is about 4x that of 1 (the base, 2, in between). A loaded
    2-core machine takes some of the top figure, never the order: measured side by side, the
    ratios are asserted with wide margins."""
    from console.bench.models import BenchmarkRun
    from console.bench.sweeps.choices import Objective, SweepKind
    from console.bench.sweeps.models import Sweep

    swept = swept_node(tier_config(max_in_flight=2))
    sweep = make_sweep(
        swept,
        kind=SweepKind.TIER_CONFIG,
        variables=[{"path": PATH, "values": [1, 4, 16]}],
        objective=Objective.MAX_THROUGHPUT,
        repeats=2,
    )
    # Live progress: after the first trial, the ETA is the mean trial's wall time x 3 left.
    progress = wait_for(
        lambda: (
            Sweep.objects.filter(pk=sweep.pk, trials_done__gte=1, eta_s__isnull=False)
            .values("trials_done", "eta_s", "status")
            .first()
        ),
        timeout=60,
        what="the first trial to be counted",
    )
    assert progress["status"] != "running" or progress["eta_s"] > 0, progress
    sweep = wait_finished(sweep)
    info = describe(sweep)
    assert sweep.status == "succeeded", info
    trials = by_value(sweep, PATH)
    assert set(trials) == {"base", 1, 4, 16}, info
    assert all(t.status == "succeeded" and t.feasible for t in trials.values()), info
    rps = {value: t.metrics["throughput_rps"] for value, t in trials.items()}
    assert sweep.best_trial_id == trials[16].pk, info
    assert rps[4] > 2.5 * rps[1] and rps[16] > 1.8 * rps[4], info
    assert rps[1] < rps["base"] < rps[4], info
    one_request_s = WORKLOAD["max_tokens"] * STEP_S
    assert rps[1] < 1.2 / one_request_s, info  # one at a time: never above ~6 req/s
    # Every trial is an ordinary series of `repeats` runs with the trial's version in its
    # snapshot, and the base trial ran the base version itself.
    assert trials["base"].tier_config_id == swept.tier_config.pk
    for value, trial in trials.items():
        runs = BenchmarkRun.objects.filter(series=trial.series)
        assert runs.count() == 2 and all(r.status == "succeeded" for r in runs), info
        for run in runs:
            snap = run.config_snapshot["nodes"][0]["tier_config"]
            assert snap["id"] == trial.tier_config_id, (value, snap)
            assert snap["config"]["scheduler"]["admission"]["max_in_flight"] == (
                2 if value == "base" else value
            )
    # The compare page's API works on any two trials: their series, with the config diff.
    compared = api(operator).get(
        f"/api/v1/benchmarks/compare/?a=s{trials[1].series_id}&b=s{trials[16].series_id}"
    )
    assert compared.status_code == 200, compared.content
    diff = {row["path"]: row for row in compared.json()["config_diff"]}
    assert any(path.endswith("admission.max_in_flight") for path in diff), diff
    made = trials[16].tier_config
    assert made.name == f"{swept.tier_config.name}-sweep{sweep.pk}-trial{trials[16].index}"
    assert made.message == f"sweep #{sweep.pk} trial {trials[16].index}: {PATH}=16"
    assert trials[16].apply_s is not None and trials[16].bench_s is not None
    assert sweep.trials_done == 4 and sweep.eta_s == 0.0
    # Back on the base: desired and applied.
    assert sweep.restored
    node = swept.reload()
    assert node.desired_tier_config_id == swept.tier_config.pk
    assert node.applied_tier_config_id == swept.tier_config.pk
    assert swept.agent.applied() == swept.tier_config.pk
