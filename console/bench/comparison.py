"""Before/after comparison of two runs: percentile deltas with bootstrap verdicts (pure).

The verdict on a metric (say TTFT P99 of the online tier) comes from a percentile bootstrap
of the difference B - A: resample each run's values with replacement, take the percentile of
each resample, and read the 2.5th and 97.5th percentiles of the B - A differences. Lower
latency is better, so a whole interval below zero is "better", above zero "worse", and an
interval that holds zero is "no clear change".

Percentiles are nearest-rank (loadgen.percentiles, docs/metrics.md), as in the run summaries.

Speed: a resample's nearest-rank percentile is one order statistic of the resampled indices,
and the j-th smallest of n uniform indices has a known law (U_(j) ~ Beta(j, n-j+1)). Drawing
it directly gives exactly the distribution that resampling n values would, in O(1) per
resample instead of O(n), so verdicts use every sample of a 100k-request run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from console.bench.choices import Verdict
from loadgen.percentiles import percentile, percentiles, rank

RESAMPLES = 1000
CONFIDENCE = 0.95
MIN_SAMPLES = 10
SEED = 20260101
CDF_POINTS = 500

# (metric key, sample field, percentile): the metrics a comparison gives a verdict on.
METRICS: tuple[tuple[str, str, float], ...] = (
    ("ttft_p50", "ttft", 50.0),
    ("ttft_p99", "ttft", 99.0),
    ("tpot_p50", "tpot", 50.0),
    ("tpot_p99", "tpot", 99.0),
    ("e2e_p50", "e2e", 50.0),
    ("e2e_p99", "e2e", 99.0),
)


def bootstrap_percentiles(
    sorted_values: np.ndarray, q: float, resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """`resamples` draws of the q-th percentile of a bootstrap resample of `sorted_values`.

    Same law as percentile(rng.choice(values, n), q), computed from the one order statistic
    the nearest-rank percentile picks (see the module docstring)."""
    n = sorted_values.size
    if n == 1:
        return np.full(resamples, float(sorted_values[0]))
    j = rank(n, q)  # 1-based order statistic
    u = rng.beta(j, n - j + 1, size=resamples)
    # A uniform u picks index ceil(n*u) - 1 (0-based); ceil is monotone, so order is kept.
    return sorted_values[np.clip(np.ceil(u * n).astype(np.int64) - 1, 0, n - 1)]


@dataclass(frozen=True)
class MetricDelta:
    metric: str
    before: float | None
    after: float | None
    delta: float | None
    delta_pct: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def verdict_of(ci_low: float, ci_high: float, lower_is_better: bool = True) -> str:
    if ci_high < 0:
        return Verdict.BETTER if lower_is_better else Verdict.WORSE
    if ci_low > 0:
        return Verdict.WORSE if lower_is_better else Verdict.BETTER
    return Verdict.NO_CLEAR_CHANGE


def compare_percentile(
    before: Sequence[float] | np.ndarray,
    after: Sequence[float] | np.ndarray,
    q: float,
    metric: str = "",
    *,
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = SEED,
) -> MetricDelta:
    """The q-th percentile of after minus before, its bootstrap interval and verdict."""
    a = np.sort(np.asarray(before, dtype=float))
    b = np.sort(np.asarray(after, dtype=float))
    a_stat = percentile(a, q) if a.size else None
    b_stat = percentile(b, q) if b.size else None
    if a_stat is None or b_stat is None:
        return MetricDelta(metric, a_stat, b_stat, None, None, None, None, Verdict.NOT_ENOUGH_DATA)
    delta = b_stat - a_stat
    pct = delta / a_stat * 100 if a_stat else None
    if a.size < MIN_SAMPLES or b.size < MIN_SAMPLES:
        return MetricDelta(metric, a_stat, b_stat, delta, pct, None, None, Verdict.NOT_ENOUGH_DATA)
    rng = np.random.default_rng(seed)
    diffs = bootstrap_percentiles(b, q, resamples, rng) - bootstrap_percentiles(
        a, q, resamples, rng
    )
    tail = (1 - confidence) / 2 * 100
    low, high = percentiles(diffs, [tail, 100 - tail])
    return MetricDelta(metric, a_stat, b_stat, delta, pct, low, high, verdict_of(low, high))


def compare_groups(
    before: dict[str, np.ndarray], after: dict[str, np.ndarray], **kwargs: float
) -> list[MetricDelta]:
    """Every metric of METRICS for one tier; `before`/`after` map a sample field to values."""
    empty = np.empty(0)
    return [
        compare_percentile(before.get(field, empty), after.get(field, empty), q, key, **kwargs)  # type: ignore[arg-type]
        for key, field, q in METRICS
    ]


def cdf_points(
    values: Sequence[float] | np.ndarray, points: int = CDF_POINTS
) -> tuple[list[float], list[float]]:
    """(x, y) of the empirical CDF at `points` evenly spaced quantiles: enough to draw, however
    many samples there are. Computed from all of them."""
    arr = np.asarray(values, dtype=float)
    arr = arr[~np.isnan(arr)]
    if arr.size == 0:
        return [], []
    probs = np.linspace(0.0, 1.0, min(points, max(arr.size, 2)))
    return percentiles(arr, [float(p) * 100 for p in probs]), [float(p) for p in probs]
