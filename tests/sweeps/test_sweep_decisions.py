"""Sweeps decide before they crown (issue 56): a trial is the best only when its decision
against the base reads "better", else the result says "no trial beats the base"; trials run 3
times by default; adopting an undecided trial needs an explicit flag; Pareto points carry
their values; tokens/s per user is the median per request, which merged chunks cannot
dominate."""

from __future__ import annotations

from statistics import fmean
from typing import Any

import pytest

from console.bench.sweeps.charts import TrialPoint, pareto_figure
from console.bench.sweeps.scoring import decode_speed, winner_index
from console.bench.sweeps.spec import TrialOutcome
from tests.bench.decision_data import BEFORE, new_run
from tests.sweeps.api_helpers import WAIT, body, finish, make_node

URL = "/api/v1/sweeps/"
UNDECIDED = {"outcome": "not enough data", "headline": "not enough data: about 4 more runs"}


@pytest.fixture
def setup(db: None) -> dict[str, Any]:
    return make_node()


def _sweep(api: Any, user: Any, node: Any, **overrides: Any) -> Any:
    from console.bench.sweeps.models import Sweep

    response = api(user).post(URL, body(node, **overrides), format="json")
    assert response.status_code == 201, response.json()
    return Sweep.objects.get(pk=response.json()["id"])


def test_a_trial_runs_three_times_unless_told(api: Any, operator: Any, setup: Any) -> None:
    data = body(setup["node"])
    del data["repeats"]
    response = api(operator).post(URL, data, format="json")
    assert response.status_code == 201 and response.json()["repeats"] == 3


def test_adopting_an_undecided_trial_needs_the_flag(api: Any, operator: Any, setup: Any) -> None:
    from console.tuning.models import TierConfigVersion
    from console.tuning.rollouts.models import Rollout

    sweep = _sweep(api, operator, setup["node"])
    finish(sweep, [{"values": {WAIT: 1}, "decision": UNDECIDED}])
    refused = api(operator).post(f"{URL}{sweep.pk}/adopt/", {"trial": 1}, format="json")
    assert refused.status_code == 400
    said = refused.json()["confirm_undecided"][0]
    assert "trial 1 is not shown better than the base" in said
    assert "not enough data: about 4 more runs" in said and "confirm_undecided: true" in said
    assert not Rollout.objects.exists() and TierConfigVersion.objects.count() == 1
    taken = api(operator).post(
        f"{URL}{sweep.pk}/adopt/", {"trial": 1, "confirm_undecided": True}, format="json"
    )
    assert taken.status_code == 201, taken.json()
    version = TierConfigVersion.objects.get(name="tiers", version=2)
    assert version.message.endswith("(confirmed though undecided)")


def test_the_best_is_only_a_trial_decided_better_than_the_base(
    api: Any, operator: Any, setup: Any
) -> None:
    from console.bench.sweeps import trials
    from console.bench.sweeps.executor import Executor

    sweep = _sweep(api, operator, setup["node"])
    # Trial 1 has the lowest online TTFT P99 but is inside the noise; trial 2 is decided.
    finish(
        sweep,
        [
            {"values": {WAIT: 1}, "objective_value": 20.0, "decision": UNDECIDED},
            {"values": {WAIT: 5}, "objective_value": 40.0},
            {"values": {WAIT: 20}, "objective_value": 60.0},
        ],
        status="running",
    )
    best, result = trials.best_of(trials.outcomes(sweep))
    assert best is not None and best.index == 2 and result.startswith("trial 2 beats the base")
    # None decided better: the base stays, and the sweep's result says so.
    sweep.trials.exclude(index=0).update(decision=UNDECIDED)
    Executor(sweep.pk).finish(sweep, "succeeded", "4 trial(s) measured", restored=True)
    sweep.refresh_from_db()
    assert sweep.best_trial is not None and sweep.best_trial.is_base
    assert sweep.status_reason == "4 trial(s) measured; no trial beats the base"


def test_winner_index_ranks_only_the_trials_decided_better() -> None:
    outcomes = [
        TrialOutcome({}, True, 30.0),
        TrialOutcome({WAIT: 1}, True, 10.0),
        TrialOutcome({WAIT: 5}, True, 20.0),
        TrialOutcome({WAIT: 9}, False, 5.0),
    ]
    assert winner_index(outcomes, [False, False, True, True]) == 2  # 3 breaks a constraint
    assert winner_index(outcomes, [False, True, True, False]) == 1
    assert winner_index(outcomes, [False] * 4) is None


def test_a_trial_is_decided_against_the_base_by_the_sweeps_objective(setup: Any) -> None:
    """trials.decision_against_base over real series: an A/A trial is not "better"; one
    whose every tier's TTFT is 60% lower is."""
    from console.bench.models import RunSeries
    from console.bench.sweeps import trials
    from console.bench.sweeps.models import Sweep

    def series(ttft_scale: float, seed: int) -> Any:
        made = RunSeries.objects.create(repeats=3)
        for i in range(3):
            ttft = {k: v * ttft_scale for k, v in BEFORE["ttft"].items()}
            run = new_run(setup["endpoint"], **{**BEFORE, "ttft": ttft}, seed=seed + i)
            run.series = made
            run.save(update_fields=["series"])
        return made

    sweep = Sweep(objective="min_online_ttft_p99", constraints={"max_ttft_p99_ms": {"batch": 900}})
    base, same, faster = series(1.0, 10), series(1.0, 20), series(0.4, 30)
    aa = trials.decision_against_base(sweep, base.pk, same.pk)
    assert aa["outcome"] != "better" and aa["objectives"][0]["label"] == "online TTFT P99"
    batch = next(g for g in aa["guardrails"] if g["label"] == "batch TTFT P99")
    assert batch["slo"] == pytest.approx(0.9)  # the sweep's cap is the guardrail's SLO
    won = trials.decision_against_base(sweep, base.pk, faster.pk)
    assert won["outcome"] == "better", won["text"]
    assert (
        trials.decision_against_base(sweep, base.pk, RunSeries.objects.create(repeats=3).pk) == {}
    )


def test_tokens_per_user_is_the_median_rate_that_merged_chunks_cannot_dominate() -> None:
    """200 requests of 20 tokens decoding at 10 ms a token (1/TPOT = 100 tok/s); in 10 of
    them every chunk reached the client together, 0.6 ms after the first: their rate reads
    31,667 tok/s, and a mean over requests would read 1,678."""
    steady = [(20, 0.05, 0.05 + 19 * 0.010)] * 190
    merged = [(20, 0.05, 0.0506)] * 10
    samples = steady + merged
    rates = [(t - 1) / (e - f) for t, f, e in samples]
    assert fmean(rates) > 1600  # what the old mean reported
    assert decode_speed(samples) == pytest.approx(100.0)
    assert decode_speed([(1, 0.05, 0.06), (None, 0.1, 0.2)]) is None  # no decode phase


def test_pareto_points_are_labelled_with_their_values() -> None:
    metrics = {
        "throughput_rps": 12.0,
        "ttft_p99_ms": {"online": 82.9},
        "tokens_per_s_per_user": 94.9,
        "tokens_per_s_per_gpu": 1900.0,
    }
    points = [
        TrialPoint(0, "base", True, {**metrics, "throughput_rps": 11.0}),
        TrialPoint(3, "#3", True, metrics),
    ]
    latency = pareto_figure(points, "latency").to_plotly_json()
    labels = [a["text"] for a in latency["layout"]["annotations"]]
    assert labels == ["base 11 req/s, 82.9 ms", "#3 12 req/s, 82.9 ms"]
    tokens = pareto_figure(points, "tokens").to_plotly_json()
    assert "#3 94.9 tok/s/user, 1,900 tok/s/GPU" in [
        a["text"] for a in tokens["layout"]["annotations"]
    ]
