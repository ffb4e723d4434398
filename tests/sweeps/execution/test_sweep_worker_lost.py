"""A Celery worker killed (SIGKILL) in the middle of a trial's benchmark: once its lease runs
out, the periodic resume hands the sweep to another worker, which measures the interrupted
trial again from a new series, finishes the sweep and puts the node back on its base. The
dead worker's run is marked failed, not left running; no version is made twice."""

from __future__ import annotations

import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.rollouts.test_rollout_worker_restart import start_worker
from tests.sweeps.execution.sweep_helpers import (
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


def test_a_sweep_whose_worker_died_is_resumed_by_another_and_ends_on_the_base(
    celery_worker_proc: Any,
    swept_node: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from console.bench.models import BenchmarkRun
    from console.bench.sweeps import tasks
    from console.bench.sweeps.choices import Objective, SweepKind
    from console.bench.sweeps.executor import LOST_WORKER
    from console.bench.sweeps.models import Sweep
    from console.tuning.models import TierConfigVersion

    swept = swept_node(tier_config(max_in_flight=2))
    # Queued by hand on a queue only the doomed worker reads (not the session's worker).
    monkeypatch.setattr(tasks, "enqueue", lambda sweep: None)
    sweep = make_sweep(
        swept,
        kind=SweepKind.TIER_CONFIG,
        variables=[{"path": PATH, "values": [4, 8]}],
        objective=Objective.MAX_THROUGHPUT,
        workload={**WORKLOAD, "duration_s": 4},
    )
    queue = f"sweeps-test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("TIERGATE_SWEEP_LEASE_S", "2")  # start_worker passes the environment on
    doomed = start_worker(queue, tmp_path / "worker.log")
    try:
        tasks.run_sweep.apply_async((sweep.pk,), queue=queue)

        def trial_one_measuring() -> Any:
            trial = sweep.trials.filter(index=1).first()
            if trial is None or trial.series_id is None:
                return None
            return BenchmarkRun.objects.filter(
                series_id=trial.series_id, status="running", requests_done__gt=0
            ).first()

        lost_run = wait_for(trial_one_measuring, timeout=60, what="trial 1 to be measuring")
        assert str(doomed.pid) in Sweep.objects.get(pk=sweep.pk).lease_owner
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        wait_for(
            lambda: sweep.pk in tasks.orphaned_sweeps(),
            timeout=10,
            what="the dead worker's lease to expire",
        )
        assert tasks.resume_sweeps() == [sweep.pk]  # what beat does every 5 s
        sweep = wait_finished(sweep, timeout=90)
    finally:
        if doomed.poll() is None:
            doomed.kill()
            doomed.wait(15)
    info = describe(sweep)
    assert sweep.status == "succeeded" and sweep.restored, info
    assert str(doomed.pid) not in sweep.lease_owner
    trials = by_value(sweep, PATH)
    assert set(trials) == {"base", 4, 8}, info
    assert all(t.status == "succeeded" for t in trials.values()), info
    lost_run.refresh_from_db()
    assert lost_run.status == "failed" and lost_run.status_reason == LOST_WORKER
    again = trials[4]
    assert again.series_id != lost_run.series_id  # measured again, in a new series
    assert BenchmarkRun.objects.get(series=again.series).status == "succeeded"
    made = TierConfigVersion.objects.filter(
        name__startswith=f"{swept.tier_config.name}-sweep{sweep.pk}-trial"
    )
    assert made.count() == 2, list(made.values_list("message", flat=True))
    node = swept.reload()
    assert node.desired_tier_config_id == swept.tier_config.pk
    assert node.applied_tier_config_id == swept.tier_config.pk
    assert swept.agent.applied() == swept.tier_config.pk
