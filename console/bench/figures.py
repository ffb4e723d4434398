"""The figures a decision reads, run by run (decisions.py is the pure core): each run's TTFT P99
per tier, request and output throughput, error and shed rates; then, for an objective, which
of them are objectives and which guardrails, overall and per tier.

    run_figures(run, arrays) -> RunFigures
    decide_sides(objective, runs_a, runs_b, slos) -> {"overall": Decision, tier: Decision, ...}

Objectives (console/bench/sweeps/choices.Objective, one list for sweeps and the compare page):
- lowest online TTFT P99: the objective is the online tier's TTFT P99 (the most urgent tier
  the runs have, when none is online); guardrails: request throughput, error rate, shed rate,
  and every other tier's TTFT P99;
- highest request throughput / output tokens/s: that figure; guardrails: error rate, shed
  rate and every tier's TTFT P99.
A TTFT guardrail with an SLO (the run's `slo_ttft_ms`, a sweep's per-tier caps) breaches only
when B is above it; without one, any worsening beyond the noise breaches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from console.bench.comparison import MIN_SAMPLES, bootstrap_percentiles
from console.bench.decisions import RATE, RATIO, Decision, Figure, decide
from console.bench.models import BenchmarkRun
from console.bench.results import Arrays, finite
from console.bench.sweeps.choices import Objective
from console.core.tiers import tier_sort_key
from loadgen.percentiles import percentile
from loadgen.stats import OVERALL

ONLINE = "online"
WITHIN_RESAMPLES = 200
SEED = 20260101
DEFAULT_OBJECTIVE = Objective.MIN_ONLINE_TTFT_P99
ANY_TIER = "*"  # a key of `slos`: the cap of every tier (a run's one slo_ttft_ms)


@dataclass
class RunFigures:
    """One run's figures per tier ("overall" included); seconds, requests/s, shares."""

    pk: int
    ttft_p99: dict[str, float] = field(default_factory=dict)
    ttft_within: dict[str, float] = field(default_factory=dict)  # relative standard error
    rps: dict[str, float] = field(default_factory=dict)
    output_tps: dict[str, float] = field(default_factory=dict)
    error_rate: dict[str, float] = field(default_factory=dict)
    shed_rate: dict[str, float] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)


def _within(values: np.ndarray) -> float:
    """Standard error of the P99's log within the run (a bootstrap of its requests)."""
    draws = bootstrap_percentiles(
        np.sort(values), 99.0, WITHIN_RESAMPLES, np.random.default_rng(SEED)
    )
    return float(np.std(np.log(np.maximum(draws, 1e-12))))


def run_figures(run: BenchmarkRun, arrays: Arrays) -> RunFigures:
    out = RunFigures(run.pk)
    for tier, columns in arrays.items():
        ttft = finite(columns["ttft"])
        if ttft.size >= MIN_SAMPLES:
            out.ttft_p99[tier] = percentile(np.sort(ttft), 99.0)
            out.ttft_within[tier] = _within(ttft)
    for tier, row in (run.summary or {}).items():
        if not isinstance(row, Mapping) or "count" not in row:
            continue
        for key, into in (
            ("request_throughput_rps", out.rps),
            ("output_throughput_tps", out.output_tps),
        ):
            if row.get(key) is not None:
                into[tier] = float(row[key])
        # The load generator's one definition (loadgen.stats.is_shed): errors do not count
        # the requests the gateway shed for overload. A run stored before it counted shed
        # requests as errors and has no shed_rate: its shed rate reads 0.
        out.error_rate[tier] = float(row.get("error_rate") or 0.0)
        out.shed_rate[tier] = float(row.get("shed_rate") or 0.0)
        out.requests[tier] = int(row.get("count") or 0)
    return out


def _tiers(runs: Sequence[RunFigures]) -> list[str]:
    """The request tiers the runs measured, most urgent first ("overall" left out)."""
    names = {t for r in runs for t in r.requests if t != OVERALL}
    return sorted(names, key=tier_sort_key)


def _ttft(tier: str, a: Sequence[RunFigures], b: Sequence[RunFigures], slo: float | None) -> Figure:
    va = [r.ttft_p99[tier] for r in a if tier in r.ttft_p99]
    vb = [r.ttft_p99[tier] for r in b if tier in r.ttft_p99]
    within_a = next((r.ttft_within[tier] for r in a if tier in r.ttft_within), 0.0)
    within_b = next((r.ttft_within[tier] for r in b if tier in r.ttft_within), 0.0)
    label = "TTFT P99" if tier == OVERALL else f"{tier} TTFT P99"
    return Figure(
        f"{tier}.ttft_p99", label, RATIO, False, va, vb, unit="ms",
        within_a=within_a if len(va) == 1 else 0.0,
        within_b=within_b if len(vb) == 1 else 0.0,
        slo=slo,
    )  # fmt: skip


def _per_run(runs: Sequence[RunFigures], attr: str, tier: str) -> list[float]:
    """One side's values of a per-tier figure (`attr` of RunFigures), from the runs that have
    the tier."""
    return [getattr(r, attr)[tier] for r in runs if tier in getattr(r, attr)]


def _throughput(
    tier: str, a: Sequence[RunFigures], b: Sequence[RunFigures], output: bool = False
) -> Figure:
    attr = "output_tps" if output else "rps"
    name = "output tokens/s" if output else "request throughput"
    return Figure(
        f"{tier}.{attr}",
        name if tier == OVERALL else f"{tier} {name}",
        RATIO,
        True,
        _per_run(a, attr, tier),
        _per_run(b, attr, tier),
        unit="tok/s" if output else "req/s",
    )


def _rate(tier: str, a: Sequence[RunFigures], b: Sequence[RunFigures], shed: bool) -> Figure:
    attr = "shed_rate" if shed else "error_rate"
    name = "shed rate" if shed else "error rate"
    return Figure(
        f"{tier}.{attr}",
        name if tier == OVERALL else f"{tier} {name}",
        RATE,
        False,
        _per_run(a, attr, tier),
        _per_run(b, attr, tier),
        unit="%",
        requests_a=sum(r.requests.get(tier, 0) for r in a),
        requests_b=sum(r.requests.get(tier, 0) for r in b),
    )


def objective_tier(tiers: Sequence[str]) -> str:
    """The tier a latency objective reads: online, else the most urgent one measured."""
    if ONLINE in tiers:
        return ONLINE
    return tiers[0] if tiers else OVERALL


def _split(
    objective: str,
    tier: str,
    a: Sequence[RunFigures],
    b: Sequence[RunFigures],
    latency_tiers: Sequence[str],
    slos: Mapping[str, float],
) -> tuple[list[Figure], list[Figure]]:
    """(objectives, guardrails) for one scope: `tier` (or "overall") is where throughput and
    rates are read; `latency_tiers` the TTFT P99s that count."""
    guards = [_rate(tier, a, b, shed=False), _rate(tier, a, b, shed=True)]
    if objective == Objective.MIN_ONLINE_TTFT_P99:
        first = tier if tier != OVERALL else objective_tier(latency_tiers)
        objectives = [_ttft(first, a, b, slos.get(first))]
        guards.insert(0, _throughput(tier, a, b))
        guards += [_ttft(t, a, b, slos.get(t)) for t in latency_tiers if t != first]
    else:
        objectives = [_throughput(tier, a, b, output=objective == Objective.MAX_OUTPUT_TOKENS)]
        guards += [_ttft(t, a, b, slos.get(t)) for t in latency_tiers]
    return objectives, guards


def decide_sides(
    objective: str,
    a: Sequence[RunFigures],
    b: Sequence[RunFigures],
    slos: Mapping[str, float] | None = None,
) -> dict[str, Decision]:
    """The overall decision ("overall") and one per tier; `slos`: TTFT P99 caps in seconds
    per tier (ANY_TIER: every tier's)."""
    slos = _every_tier(slos or {}, _tiers([*a, *b]))
    tiers = _tiers([*a, *b])
    out = {OVERALL: decide(*_split(objective, OVERALL, a, b, tiers, slos))}
    for tier in tiers:
        out[tier] = decide(*_split(objective, tier, a, b, [tier], slos))
    return out


def _every_tier(slos: Mapping[str, float], tiers: Sequence[str]) -> dict[str, float]:
    """Per-tier caps; ANY_TIER's value stands for every tier without its own."""
    out = {t: slos[ANY_TIER] for t in (*tiers, OVERALL)} if ANY_TIER in slos else {}
    return {**out, **{t: v for t, v in slos.items() if t != ANY_TIER}}


def objective_of(raw: str | None) -> str:
    """A declared objective, or the default when none (or an unknown one) is given."""
    return raw if raw in Objective.values else DEFAULT_OBJECTIVE
