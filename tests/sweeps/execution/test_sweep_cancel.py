"""Cancel in the middle of a trial's benchmark stops the running run within seconds, and the
node is put back on its base (desired and applied) before the sweep ends cancelled."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sweeps.execution.sweep_helpers import (
    WORKLOAD,
    describe,
    make_sweep,
    tier_config,
    wait_finished,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.slow
PATH = "scheduler.admission.max_in_flight"
DURATION_S = 8


def test_cancel_mid_sweep_stops_the_running_benchmark_and_restores_the_base(
    celery_worker_proc: Any, swept_node: Any, operator: Any, api: Any
) -> None:
    from console.bench.models import BenchmarkRun
    from console.bench.sweeps.choices import Objective, SweepKind
    from console.fleet.models import Node

    swept = swept_node(tier_config(max_in_flight=2))
    sweep = make_sweep(
        swept,
        kind=SweepKind.TIER_CONFIG,
        variables=[{"path": PATH, "values": [8, 16]}],
        objective=Objective.MAX_THROUGHPUT,
        workload={**WORKLOAD, "duration_s": DURATION_S},
    )

    def trial_one_running() -> Any:
        trial = sweep.trials.filter(index=1).first()
        if trial is None or trial.series_id is None:
            return None
        return BenchmarkRun.objects.filter(
            series_id=trial.series_id, status="running", requests_done__gt=0
        ).first()

    run = wait_for(trial_one_running, timeout=60, what="trial 1's benchmark to make progress")
    node = Node.objects.get(pk=swept.node.pk)
    assert node.desired_tier_config_id != swept.tier_config.pk  # the trial's version
    response = api(operator).post(f"/api/v1/sweeps/{sweep.pk}/cancel/")
    assert response.status_code in (200, 202), response.content
    sweep = wait_finished(sweep, timeout=30)
    info = describe(sweep)
    assert sweep.status == "cancelled" and sweep.restored, info
    run.refresh_from_db()
    assert run.status == "cancelled" and run.elapsed_s < DURATION_S - 1, (run.status, run.elapsed_s)
    trial = sweep.trials.get(index=1)
    assert trial.status == "cancelled", info
    assert not sweep.trials.filter(index=2).exists(), info  # nothing planned after the cancel
    node.refresh_from_db()
    assert node.desired_tier_config_id == swept.tier_config.pk, info
    assert node.applied_tier_config_id == swept.tier_config.pk, info
    assert swept.agent.applied() == swept.tier_config.pk
    # The base trial, measured before the cancel, is still the best (the only one measured).
    assert sweep.best_trial_id == sweep.trials.get(index=0).pk, info
