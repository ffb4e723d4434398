"""The comparison statistics against hand-computed fixtures, and the bootstrap shortcut
against brute-force resampling."""

from __future__ import annotations

import numpy as np
import pytest

from console.bench.comparison import (
    bootstrap_percentiles,
    cdf_points,
    compare_percentile,
    verdict_of,
)
from console.bench.presets import PRESETS, preset_workload, profile_counts, prompts_jsonl
from loadgen.percentiles import percentile, rank


def test_compared_percentiles_are_the_nearest_rank_of_the_run_summaries() -> None:
    result = compare_percentile(np.arange(1.0, 11.0), np.arange(1.0, 101.0), 90)
    assert (result.before, result.after) == (9.0, 90.0)  # measured values, never between two
    assert result.before == percentile(np.arange(1.0, 11.0), 90)


def test_the_cdf_is_drawn_at_a_bounded_number_of_quantiles() -> None:
    assert cdf_points([3.0, 1.0, 2.0], points=3) == ([1.0, 2.0, 3.0], [0.0, 0.5, 1.0])
    x, y = cdf_points(np.arange(100_000, dtype=float), points=500)
    assert len(x) == len(y) == 500 and x[0] == 0 and x[-1] == 99_999 and y[-1] == 1.0
    assert cdf_points([]) == ([], [])


def test_verdicts_read_the_interval_against_zero() -> None:
    assert verdict_of(-0.2, -0.1) == "better"
    assert verdict_of(0.1, 0.3) == "worse"
    assert verdict_of(-0.1, 0.1) == "no clear change"
    assert verdict_of(0.1, 0.3, lower_is_better=False) == "better"


def test_a_shift_of_fifty_is_worse_with_the_delta_in_the_interval() -> None:
    before = np.arange(1.0, 101.0)
    result = compare_percentile(before, before + 50, 50, "ttft_p50")
    assert (result.before, result.after, result.delta) == (50.0, 100.0, 50.0)
    assert result.delta_pct == pytest.approx(100.0)
    assert result.ci_low is not None and result.ci_high is not None
    assert 30 < result.ci_low < 50 < result.ci_high < 70
    assert result.verdict == "worse"


def test_halving_the_latency_is_better() -> None:
    before = np.arange(1.0, 201.0)
    assert compare_percentile(before, before / 2, 99).verdict == "better"


def test_the_same_values_show_no_clear_change() -> None:
    values = np.random.default_rng(3).exponential(0.2, 500)
    result = compare_percentile(values, values.copy(), 99)
    assert result.delta == 0.0 and result.verdict == "no clear change"
    assert result.ci_low is not None and result.ci_low < 0 < result.ci_high  # type: ignore[operator]


def test_two_draws_of_the_same_distribution_show_no_clear_change() -> None:
    rng = np.random.default_rng(11)
    result = compare_percentile(rng.normal(1, 0.1, 2000), rng.normal(1, 0.1, 2000), 50)
    assert result.verdict == "no clear change"


def test_few_samples_are_not_enough_for_a_verdict() -> None:
    result = compare_percentile([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], 50)
    assert result.delta == 3.0 and result.verdict == "not enough data" and result.ci_low is None
    assert compare_percentile([], [1.0], 50).verdict == "not enough data"


def test_verdicts_are_reproducible() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.exponential(1, 300), rng.exponential(1.1, 300)
    assert compare_percentile(a, b, 90) == compare_percentile(a, b, 90)


@pytest.mark.parametrize("q", [50.0, 90.0, 99.0])
def test_the_order_statistic_bootstrap_matches_brute_force_resampling(q: float) -> None:
    rng = np.random.default_rng(1)
    values = np.sort(rng.exponential(1.0, 150))
    fast = bootstrap_percentiles(values, q, 20_000, np.random.default_rng(2))
    resampled = np.sort(values[rng.integers(0, values.size, (20_000, values.size))], axis=1)
    brute = resampled[:, rank(values.size, q) - 1]
    assert fast.mean() == pytest.approx(brute.mean(), rel=0.02)
    assert fast.std() == pytest.approx(brute.std(), rel=0.05)
    assert percentile(fast, 2.5) == pytest.approx(percentile(brute, 2.5), rel=0.03)
    assert set(np.unique(fast)) <= set(values)  # every draw is a measured value


def test_a_verdict_on_100k_samples_brackets_the_true_shift() -> None:
    # 100k a side, the after side shifted by 2 ms (about 4 standard errors of the difference of
    # the medians): the interval holds the shift and not zero. (How long the bootstrap takes
    # is a benchmark's question; the method is checked against resampling above.)
    rng = np.random.default_rng(8)
    a, b = rng.exponential(0.1, 100_000), rng.exponential(0.1, 100_000) + 0.002
    result = compare_percentile(a, b, 50)
    assert result.ci_low is not None and result.ci_high is not None
    assert 0 < result.ci_low < 0.002 < result.ci_high, result
    assert result.verdict == "worse"


def test_tier_profiles_become_a_prompts_file_in_the_tier_shares() -> None:
    profiles = preset_workload("mixed-tiers", "http://x/v1", "m")[1]
    assert profile_counts(profiles, 10) == {"online": 7, "batch": 2, "offline": 1}
    assert profile_counts({"a": {"weight": 1}, "b": {"weight": 1}, "c": {"weight": 1}}, 10) in (
        {"a": 4, "b": 3, "c": 3},
        {"a": 3, "b": 4, "c": 3},
        {"a": 3, "b": 3, "c": 4},
    )
    import json

    records = [json.loads(line) for line in prompts_jsonl(profiles, total=100).splitlines()]
    assert len(records) == 100
    assert sum(r["tier"] == "online" for r in records) == 70
    assert {r["max_tokens"] for r in records if r["tier"] == "offline"} == {256}
    assert len(next(r for r in records if r["tier"] == "batch")["prompt"].split()) == 512
    # Not sorted by tier: every stretch of a run sees the mix.
    assert {r["tier"] for r in records[:20]} == {"online", "batch", "offline"}


def test_every_preset_is_a_valid_workload() -> None:
    from loadgen import WorkloadSpec

    for key in PRESETS:
        workload, _ = preset_workload(key, "http://127.0.0.1:1/v1", "m")
        assert WorkloadSpec.from_dict(workload).model == "m"
