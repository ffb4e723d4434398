"""Constraints exclude trials: a trial that breaks one is marked infeasible with a sentence
naming the constraint, and is never the best, even with the best objective value."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sweeps.execution.sweep_helpers import (
    by_value,
    describe,
    make_sweep,
    tier_config,
    wait_finished,
)

pytestmark = pytest.mark.slow
PATH = "scheduler.queues.online.queue_timeout_ms"


def test_a_trial_breaking_the_error_rate_cap_is_infeasible_and_never_chosen(
    celery_worker_proc: Any, swept_node: Any
) -> None:
    """The gateway lets 4 requests into the engine at once; each takes ~165 ms (8 steps of
    ~20 ms), so the node serves ~24 req/s and the other 12 of the 16 clients wait in the
    online queue, ~12 / 24 = 0.5 s each: the base's online TTFT P99 is 0.5-0.7 s, with no error.
    A queue timeout of 200 ms refuses every request that would wait longer, which is most of
    them (their mean wait is 0.5 s): the ones served waited under 200 ms, so that trial has by
    far the lowest online TTFT P99 (the objective) but an error rate of tens of percent, over
    the 5 % cap. A timeout of 100 s never fires: it measures like the base. So the 200 ms
    trial must be infeasible, and the best one of the other two."""
    from console.bench.sweeps.choices import Objective, SweepKind

    swept = swept_node(tier_config(max_in_flight=4))
    sweep = make_sweep(
        swept,
        kind=SweepKind.TIER_CONFIG,
        variables=[{"path": PATH, "values": [200, 100_000]}],
        objective=Objective.MIN_ONLINE_TTFT_P99,
        constraints={
            "max_error_rate": 0.05,
            "max_ttft_p99_ms": {"online": 5000},
            "min_throughput_rps": 5,
        },
    )
    sweep = wait_finished(sweep)
    info = describe(sweep)
    assert sweep.status == "succeeded" and sweep.restored, info
    trials = by_value(sweep, PATH)
    fast = trials[200]
    assert fast.status == "succeeded" and fast.feasible is False, info
    assert fast.metrics["error_rate"] > 0.1, info
    assert len(fast.violations) == 1 and fast.violations[0].startswith("error rate "), info
    assert fast.violations[0].endswith("> max 5.0%"), info
    # It has the best objective value of all, and is still not chosen.
    assert fast.objective_value == min(t.objective_value for t in trials.values()), info
    assert sweep.best_trial_id in (trials["base"].pk, trials[100_000].pk), info
    assert sweep.best_trial.feasible is True and sweep.best_trial.violations == [], info
    assert trials[100_000].feasible and trials["base"].feasible, info
