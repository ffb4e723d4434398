"""Verdicts that include run-to-run noise (pure): A runs against B runs of the same metric.

One run is one draw of everything that varies between runs (engine state, machine load,
warmup, the order requests met each other), so the spread of a statistic between runs is
what an interval must cover, not only the spread of requests within a run. The verdict on a
metric (say TTFT P99 of the online tier) therefore works on run-level statistics:

- two or more runs per side: each run's statistic (its P99) is one observation, and the
  interval for mean(B) - mean(A) is Welch's t interval over them. It holds the within-run
  noise too, since every run's statistic carries its own sampling error. Under A/A (both
  sides the same) a 95% interval excludes zero in about 5% of verdicts;
- one run on one side and two or more on the other: the same, with the spread of the larger
  side standing in for both (a pooled t interval);
- one run per side: the wider of the within-run bootstrap (comparison.py) and a batch-means
  interval over five stretches of each run (block_interval), which sees slow swings inside
  a run that the bootstrap, taking requests as independent, does not. Neither sees what
  differs between runs, so the interval is widened by an assumed run-to-run spread
  (PROVISIONAL_RUN_CV) and the verdict is provisional, as is any comparison with a
  one-run side. A tail percentile of a short run is its few slowest requests, so it gets no
  one-run verdict unless TAIL_SAMPLES requests lie beyond it.

A tier has several metrics, and an A/A comparison would call one of eight "better" or
"worse" far more often than 5% of the time if each had its own 95% interval. So the
intervals of one tier are simultaneous (per_metric_confidence, Bonferroni): all of them hold
together at 95%. These per-metric verdicts are the evidence behind a comparison; what to do
is the decision's (decisions.py: a declared objective and guardrails), not a vote of them.

A verdict is "better" or "worse" only when the interval excludes zero and the change is at
least MIN_EFFECT_PCT of A: differences smaller than that are not worth acting on even when
many runs resolve them, and they are where unmodelled drift lives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from console.bench.choices import Verdict
from console.bench.comparison import CONFIDENCE, MIN_SAMPLES, compare_percentile, percentile

MIN_EFFECT_PCT = 5.0
# Stretches of one run for the batch-means interval, and the fewest requests in one.
BLOCKS = 5
MIN_BLOCK = 10
# Run-to-run spread assumed for a side of one run (coefficient of variation of a run's
# figure): repeats measure it instead. Simulator runs on a quiet machine vary by a few
# percent; a loaded client machine or a real engine more (docs/benchmarks.md).
PROVISIONAL_RUN_CV = 0.10
# A one-run verdict on a percentile needs this many requests beyond it (P99: 300 requests).
TAIL_SAMPLES = 3
WITHIN_RUN = "within one run (bootstrap and batch means) + assumed run-to-run spread"
T_OVER_RUNS = "t interval over runs"


@dataclass(frozen=True)
class RunLevelDelta:
    metric: str
    before: float | None  # mean over side A's runs of the run-level statistic
    after: float | None
    delta: float | None
    delta_pct: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str
    runs_a: int  # runs that gave this statistic
    runs_b: int
    method: str
    provisional: bool
    higher_is_better: bool = False

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def verdict_of(
    low: float,
    high: float,
    delta: float,
    before: float,
    higher_is_better: bool = False,
    min_effect_pct: float = MIN_EFFECT_PCT,
) -> str:
    if low <= 0 <= high:
        return Verdict.NO_CLEAR_CHANGE
    if before and abs(delta / before) * 100 < min_effect_pct:
        return Verdict.NO_CLEAR_CHANGE
    up = low > 0
    return Verdict.BETTER if up == higher_is_better else Verdict.WORSE


def t_interval(
    a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Interval for mean(b) - mean(a): Welch with two or more values a side, else pooled
    with the larger side's variance. Needs at least three values in all."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    na, nb = xa.size, xb.size
    delta = float(xb.mean() - xa.mean())
    if na >= 2 and nb >= 2:
        va, vb = xa.var(ddof=1) / na, xb.var(ddof=1) / nb
        se = math.sqrt(va + vb)
        df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1)) if se > 0 else na + nb - 2
    else:
        larger = xa if na >= 2 else xb
        se = float(larger.std(ddof=1)) * math.sqrt(1 / na + 1 / nb)
        df = larger.size - 1
    if se == 0:
        return delta, delta
    half = float(stats.t.ppf(0.5 + confidence / 2, df)) * se
    return delta - half, delta + half


def compare_statistic(
    a: Sequence[float],
    b: Sequence[float],
    metric: str,
    *,
    higher_is_better: bool = False,
    min_effect_pct: float = MIN_EFFECT_PCT,
    confidence: float = CONFIDENCE,
) -> RunLevelDelta:
    """A verdict on run-level values only (throughput: one figure per run)."""
    na, nb = len(a), len(b)
    before = float(np.mean(a)) if na else None
    after = float(np.mean(b)) if nb else None
    delta = after - before if before is not None and after is not None else None
    pct = delta / before * 100 if delta is not None and before else None
    provisional = min(na, nb) < 2
    if not na or not nb or na + nb < 3:
        return RunLevelDelta(
            metric, before, after, delta, pct, None, None, Verdict.NOT_ENOUGH_DATA,
            na, nb, T_OVER_RUNS, provisional, higher_is_better,
        )  # fmt: skip
    assert before is not None and delta is not None
    low, high = t_interval(a, b, confidence)
    verdict = verdict_of(low, high, delta, before, higher_is_better, min_effect_pct)
    return RunLevelDelta(
        metric, before, after, delta, pct, low, high, verdict,
        na, nb, T_OVER_RUNS, provisional, higher_is_better,
    )  # fmt: skip


def with_run_prior(
    low: float,
    high: float,
    delta: float,
    before: float,
    after: float,
    run_cv: float = PROVISIONAL_RUN_CV,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """Widen a within-run interval by run-to-run noise it cannot measure: PROVISIONAL_RUN_CV
    of each side's figure, added in quadrature to each half of the interval."""
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    runs = z * run_cv * math.hypot(before, after)
    return (
        delta - math.hypot(delta - low, runs),
        delta + math.hypot(high - delta, runs),
    )


def block_interval(
    a: np.ndarray, b: np.ndarray, q: float, delta: float, confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """Batch means: each run cut into BLOCKS stretches in send order, the statistic of each
    stretch one observation. Unlike the bootstrap, which takes requests as independent, this
    sees the slow swings within a run (a load burst, a queue building up), which make
    neighbouring requests alike. None when the stretches are too short."""
    if min(a.size, b.size) < BLOCKS * MIN_BLOCK:
        return None
    stats_a = [percentile(x, q) for x in np.array_split(a, BLOCKS)]
    stats_b = [percentile(x, q) for x in np.array_split(b, BLOCKS)]
    low, high = t_interval(stats_a, stats_b, confidence)
    centre = (low + high) / 2
    return delta - (centre - low), delta + (high - centre)


def compare_percentile_runs(
    a_runs: Sequence[np.ndarray],
    b_runs: Sequence[np.ndarray],
    q: float,
    metric: str,
    *,
    min_effect_pct: float = MIN_EFFECT_PCT,
    run_cv: float = PROVISIONAL_RUN_CV,
    confidence: float = CONFIDENCE,
) -> RunLevelDelta:
    """The q-th percentile, A's runs against B's (each array one run's values)."""
    a_ok = [r for r in a_runs if r.size >= MIN_SAMPLES]
    b_ok = [r for r in b_runs if r.size >= MIN_SAMPLES]
    if len(a_ok) == 1 and len(b_ok) == 1:
        m = compare_percentile(a_ok[0], b_ok[0], q, metric, confidence=confidence)
        low, high, verdict = m.ci_low, m.ci_high, m.verdict
        if min(a_ok[0].size, b_ok[0].size) * (1 - q / 100) < TAIL_SAMPLES:
            # P99 of 20 requests is their slowest one: one stall decides it. No verdict.
            return RunLevelDelta(
                metric, m.before, m.after, m.delta, m.delta_pct, None, None,
                Verdict.NOT_ENOUGH_DATA, 1, 1, WITHIN_RUN, True,
            )  # fmt: skip
        if low is not None and high is not None and m.before and m.delta is not None:
            blocks = block_interval(a_ok[0], b_ok[0], q, m.delta, confidence)
            if blocks is not None:  # the wider of the two
                low, high = min(low, blocks[0]), max(high, blocks[1])
            assert m.after is not None
            low, high = with_run_prior(low, high, m.delta, m.before, m.after, run_cv, confidence)
            verdict = verdict_of(low, high, m.delta, m.before, False, min_effect_pct)
        return RunLevelDelta(
            metric, m.before, m.after, m.delta, m.delta_pct, low, high, verdict,
            1, 1, WITHIN_RUN, True,
        )  # fmt: skip
    stats_a = [percentile(r, q) for r in a_ok]
    stats_b = [percentile(r, q) for r in b_ok]
    result = compare_statistic(
        stats_a, stats_b, metric, min_effect_pct=min_effect_pct, confidence=confidence
    )
    if not a_ok or not b_ok:
        # Too few samples in every run of a side: say what the runs hold, without a verdict.
        pooled_a = [percentile(np.concatenate(a_runs), q)] if sum(map(len, a_runs)) else []
        pooled_b = [percentile(np.concatenate(b_runs), q)] if sum(map(len, b_runs)) else []
        result = compare_statistic(pooled_a, pooled_b, metric)
        return RunLevelDelta(**{**result.as_dict(), "verdict": Verdict.NOT_ENOUGH_DATA})  # type: ignore[arg-type]
    return result


def per_metric_confidence(metrics: int, confidence: float = CONFIDENCE) -> float:
    """Bonferroni: each of a tier's `metrics` intervals at this level, so that all of them
    hold together at `confidence`."""
    return 1 - (1 - confidence) / max(metrics, 1)
