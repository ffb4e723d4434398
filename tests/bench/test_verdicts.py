"""Verdicts over runs against hand-computed intervals, and their false-positive rate on
synthetic A/A data whose runs differ from each other (run-level noise)."""

from __future__ import annotations

import numpy as np
import pytest

from console.bench.verdicts import (
    T_OVER_RUNS,
    WITHIN_RUN,
    compare_percentile_runs,
    compare_statistic,
    t_interval,
    verdict_of,
)


def test_welch_interval_matches_the_hand_computed_one() -> None:
    # delta 3, se sqrt(1/3 + 1/3), df 4, t(0.975, 4) = 2.7764
    low, high = t_interval([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    half = 2.7764451 * (2 / 3) ** 0.5
    assert (low, high) == pytest.approx((3 - half, 3 + half), rel=1e-6)


def test_one_run_against_several_borrows_the_larger_sides_spread() -> None:
    # pooled: sd of [4, 5, 6] = 1, se = 1 * sqrt(1 + 1/3), df 2, t(0.975, 2) = 4.3027
    low, high = t_interval([2.0], [4.0, 5.0, 6.0])
    half = 4.3026527 * (4 / 3) ** 0.5
    assert (low, high) == pytest.approx((3 - half, 3 + half), rel=1e-6)
    assert compare_statistic([2.0], [4.0, 5.0, 6.0], "x").provisional


def test_a_verdict_needs_zero_outside_the_interval_and_a_change_worth_acting_on() -> None:
    assert verdict_of(0.1, 0.3, 0.2, 1.0) == "worse"
    assert verdict_of(-0.3, -0.1, -0.2, 1.0) == "better"
    assert verdict_of(-0.1, 0.3, 0.1, 1.0) == "no clear change"
    assert verdict_of(0.01, 0.03, 0.02, 1.0) == "no clear change"  # 2% of A
    assert verdict_of(0.1, 0.3, 0.2, 1.0, higher_is_better=True) == "better"
    assert compare_statistic([10.0], [20.0], "rps", higher_is_better=True).verdict == (
        "not enough data"
    )
    assert compare_statistic([10.0, 10.5, 9.5], [5.0, 5.2, 4.8], "rps", higher_is_better=True)


def _runs(rng: np.random.Generator, count: int, spread: float) -> list[np.ndarray]:
    """Runs of 300 requests whose level moves from run to run by `spread` (machine load,
    engine state), as real runs do."""
    return [rng.exponential(0.05, 300) * rng.lognormal(0.0, spread) for _ in range(count)]


def test_on_a_a_data_with_run_to_run_noise_about_five_percent_of_verdicts_are_clear() -> None:
    rng = np.random.default_rng(20261201)
    over_runs, within, with_prior = 0, 0, 0
    trials = 300
    for _ in range(trials):
        a, b = _runs(rng, 3, 0.15), _runs(rng, 3, 0.15)
        result = compare_percentile_runs(a, b, 50, "ttft_p50", min_effect_pct=0.0)
        assert result.method == T_OVER_RUNS and not result.provisional
        over_runs += result.verdict != "no clear change"
        single = compare_percentile_runs(a[:1], b[:1], 50, "ttft_p50", min_effect_pct=0.0)
        assert single.method == WITHIN_RUN and single.provisional
        with_prior += single.verdict != "no clear change"
        bare = compare_percentile_runs(a[:1], b[:1], 50, "ttft_p50", min_effect_pct=0, run_cv=0)
        within += bare.verdict != "no clear change"
    assert over_runs / trials <= 0.08
    # Intervals from within one run do not see the run-to-run noise: far more false verdicts;
    # the assumed run spread of a provisional verdict takes some of them back.
    assert within / trials > 3 * max(over_runs / trials, 0.05)
    assert with_prior < within


def test_a_real_shift_over_runs_is_found() -> None:
    rng = np.random.default_rng(7)
    a = _runs(rng, 3, 0.05)
    b = [r * 1.5 for r in _runs(rng, 3, 0.05)]
    result = compare_percentile_runs(a, b, 50, "ttft_p50")
    assert result.verdict == "worse" and result.runs_a == result.runs_b == 3
    assert result.ci_low is not None and result.ci_low > 0
