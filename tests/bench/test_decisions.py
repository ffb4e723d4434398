"""The decision core (console/bench/decisions.py, pure): the issue's regression reads "worse",
A/A data "no clear change", too few runs "not enough data" with the runs a side that would
decide it, and over many synthetic comparisons the decision is wrong rarely: better/worse on
A/A in at most 5%, and the power calculation's N decides a real effect most of the time."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from console.bench.decisions import (
    MAX_RUNS,
    POWER,
    RATE,
    RATIO,
    Decision,
    Figure,
    decide,
    estimate,
    runs_needed,
)


def ttft(tier: str, a: list[float], b: list[float], slo: float | None = None) -> Figure:
    return Figure(f"{tier}.ttft_p99", f"{tier} TTFT P99", RATIO, False, a, b, unit="ms", slo=slo)


def rps(a: list[float], b: list[float]) -> Figure:
    return Figure("overall.rps", "request throughput", RATIO, True, a, b, unit="req/s")


def rate(name: str, a: list[float], b: list[float], requests: int = 900) -> Figure:
    return Figure(
        f"overall.{name}", name, RATE, False, a, b, unit="%", requests_a=requests,
        requests_b=requests,
    )  # fmt: skip


def test_the_issues_regression_reads_worse_whatever_improved() -> None:
    """admission.max_in_flight 12 against 24 clients, three interleaved runs a side:
    throughput -36%, offline TTFT P99 194 -> 6,872 ms, online TTFT P99 +70% inside a wide
    interval; TPOT and E2E P50 improved, but they are no objective nor guardrail."""
    decision = decide(
        [ttft("online", [0.310, 0.520, 0.905], [0.880, 0.555, 1.330])],
        [
            rps([10.1, 10.4, 9.8], [6.5, 6.6, 6.3]),
            rate("error rate", [0, 0, 0], [0, 0, 0]),
            rate("shed rate", [0, 0, 0], [0, 0, 0]),
            ttft("batch", [0.40, 0.42, 0.41], [0.41, 0.40, 0.43]),
            ttft("offline", [0.190, 0.201, 0.191], [6.70, 7.01, 6.90]),
        ],
    )
    assert decision.outcome == "worse", decision.text
    assert decision.breaches == ["request throughput", "offline TTFT P99"]
    assert decision.text.startswith("guardrail breached: request throughput -36%")
    online = decision.objectives[0]
    assert online.call == "undecided" and 0.4 < online.change < 0.9  # a geometric mean
    # The same figures with only the objective: undecided, and the page says how many runs.
    alone = decide([ttft("online", [0.310, 0.520, 0.905], [0.880, 0.555, 1.330])], [])
    assert alone.outcome == "not enough data" and alone.more_runs is not None
    assert alone.headline.startswith(f"not enough data: about {alone.more_runs} more run")


def test_a_guardrail_with_an_slo_breaches_only_above_it() -> None:
    objective = ttft("online", [0.100, 0.102, 0.098], [0.070, 0.071, 0.069])
    within = ttft("batch", [0.300, 0.305, 0.295], [0.400, 0.405, 0.395], slo=0.5)
    above = ttft("batch", [0.300, 0.305, 0.295], [0.600, 0.605, 0.595], slo=0.5)
    assert decide([objective], [within]).outcome == "better"
    worse = decide([objective], [above])
    assert worse.outcome == "worse" and worse.breaches == ["batch TTFT P99"]
    assert "SLO 500 ms" in worse.text
    # No SLO: any worsening beyond the noise is a breach.
    free = ttft("batch", [0.300, 0.305, 0.295], [0.400, 0.405, 0.395])
    assert decide([objective], [free]).outcome == "worse"


def test_errors_and_shedding_are_guardrails_in_points() -> None:
    objective = ttft("online", [0.100, 0.102, 0.098], [0.070, 0.071, 0.069])
    shed = rate("shed rate", [0.0, 0.0, 0.001], [0.06, 0.05, 0.07])
    decision = decide([objective], [shed])
    assert decision.outcome == "worse" and decision.breaches == ["shed rate"]
    assert "+6.0 pts" in decision.text
    calm = rate("error rate", [0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    assert estimate(calm).call == "no clear change"


def test_objectives_that_disagree_are_mixed_and_named() -> None:
    decision = decide(
        [
            ttft("online", [0.100, 0.102, 0.098], [0.070, 0.071, 0.069]),
            rps([10.0, 10.2, 9.9], [8.0, 8.1, 7.9]),
        ],
        [],
    )
    assert decision.outcome == "mixed"
    assert decision.disagree == ["online TTFT P99", "request throughput"]


def test_a_a_data_reads_no_clear_change() -> None:
    rng = np.random.default_rng(7)

    def runs(level: float, n: int = 4, cv: float = 0.02) -> list[float]:
        return list(level * np.exp(rng.normal(0.0, cv, n)))

    decision = decide(
        [ttft("online", runs(0.1), runs(0.1))],
        [rps(runs(10), runs(10)), rate("error rate", [0.0] * 4, [0.0] * 4)],
    )
    assert decision.outcome == "no clear change", decision.text
    assert decision.decided and decision.more_runs is None


def test_one_run_a_side_assumes_the_noise_and_still_sees_a_large_effect() -> None:
    huge = decide([ttft("online", [1.0], [0.25])], [])
    assert huge.outcome == "better" and huge.provisional
    small = decide([ttft("online", [1.0], [0.85])], [])
    assert small.outcome == "not enough data" and small.provisional
    assert small.more_runs is not None and small.more_runs >= 2


def test_runs_needed_matches_the_power_calculation_by_hand() -> None:
    """Two-sample t test on log figures, df = 2n - 2: the smallest n with
    (t(1 - a/2) + t(power)) * sd * sqrt(2 / n) <= |change|."""
    sd, change, confidence = 0.10, 0.15, 0.99
    n = runs_needed(sd, change, RATIO, confidence)
    assert n is not None

    def reach(k: int) -> float:
        df = 2 * k - 2
        t = stats.t.ppf(1 - (1 - confidence) / 2, df) + stats.t.ppf(POWER, df)
        return float(t * sd * math.sqrt(2 / k))

    assert reach(n) <= change < reach(n - 1)
    # Under the minimum effect the target is the equivalence margin instead (10% - |change|).
    assert runs_needed(0.05, 0.01, RATIO, confidence) == pytest.approx(
        next(k for k in range(2, 40) if _tost(k, 0.05) <= 0.09)
    )
    assert runs_needed(0.5, 0.06, RATIO, confidence) is None  # beyond MAX_RUNS
    assert MAX_RUNS == 30


def _tost(k: int, sd: float) -> float:
    df = 2 * k - 2
    return float((stats.t.ppf(0.95, df) + stats.t.ppf(POWER, df)) * sd * math.sqrt(2 / k))


def _simulate(effect: float, runs: int, trials: int, seed: int, cv: float = 0.06) -> list[Decision]:
    """`trials` decisions on synthetic runs: objective online TTFT P99 (B = A x effect) and
    two guardrails, each run's figure off its level by a lognormal run-to-run spread."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(trials):

        def draw(level: float) -> list[float]:
            return list(level * np.exp(rng.normal(0.0, cv, runs)))

        decision = decide(
            [ttft("online", draw(0.2), draw(0.2 * effect))],
            [rps(draw(10.0), draw(10.0)), ttft("batch", draw(0.5), draw(0.5))],
        )
        out.append(decision)
    return out


def test_a_a_decisions_err_in_at_most_five_percent() -> None:
    decisions = _simulate(1.0, runs=3, trials=400, seed=1)
    outcomes = [d.outcome for d in decisions]
    wrong = sum(o in ("better", "worse", "mixed") for o in outcomes) / len(outcomes)
    assert wrong <= 0.05, wrong
    # At 6% run-to-run noise, 3 runs a side rarely show that nothing moved by 10%: those say
    # how many runs would, and that many decide "no clear change" far more often.
    undecided = [d for d in decisions if d.outcome == "not enough data"]
    counted = [d.more_runs for d in undecided if d.more_runs]
    # The rest: changes so near 5% that more than MAX_RUNS a side would be needed.
    assert len(counted) >= 0.8 * len(undecided)
    n = 3 + int(np.median(counted))
    more = [d.outcome for d in _simulate(1.0, runs=n, trials=200, seed=4)]
    assert more.count("no clear change") / len(more) >= POWER - 0.15, (n, more)


def test_a_known_effect_is_never_called_no_clear_change_and_n_runs_decide_it() -> None:
    three = [d.outcome for d in _simulate(0.8, runs=3, trials=300, seed=2)]
    assert three.count("no clear change") / len(three) <= 0.05
    # The N the power calculation gives for this noise decides it about POWER of the time.
    n = runs_needed(0.06, math.log(0.8), RATIO, 1 - 0.05 / 3)
    assert n is not None and 3 <= n <= 10
    decided = [d.outcome for d in _simulate(0.8, runs=n, trials=300, seed=3)]
    assert decided.count("better") / len(decided) >= POWER - 0.1, (n, decided.count("better"))
