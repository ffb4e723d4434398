"""How a trial is scored (pure): its metrics over its repeats, the constraints it breaks, its
objective value, the Pareto front of a set of trials and the best feasible one.

    trial_metrics(run_summaries, gpu_count=1, user_speeds=None) -> metrics
    decode_speed(samples) -> tokens/s per user (None: no request decoded)
    evaluate(metrics, constraints) -> (feasible, violations)
    objective_value(metrics, objective) -> float | None      # lower is better
    pareto_front(points, minimize) -> [index, ...]
    best_index(outcomes) -> index | None
    winner_index(outcomes, better) -> index | None   # only among trials decided "better"

Metrics (means over the repeats): throughput_rps, output_tokens_per_s, tokens_per_s_per_user
(decode speed per request, (output tokens - 1) / (e2e - TTFT) = 1/TPOT, the median over a
run's requests: docs/metrics.md, "Per-request rates"), tokens_per_s_per_gpu (output tokens/s
over the node's GPUs), error_rate (errors and shed), ttft_p99_ms and ttft_p50_ms per tier
("overall" too), requests (summed) and repeats.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from statistics import fmean, median
from typing import Any

from console.bench.sweeps.choices import Objective
from console.bench.sweeps.spec import Constraints, TrialOutcome

ONLINE = "online"
OVERALL = "overall"


def _mean(values: Iterable[float | None]) -> float | None:
    present = [float(v) for v in values if v is not None]
    return fmean(present) if present else None


def decode_speed(samples: Iterable[tuple[int | None, float | None, float | None]]) -> float | None:
    """Tokens/s per user: the median over requests of (output tokens - 1) / (e2e - TTFT), from
    (output_tokens, ttft, e2e) triples in seconds: each request's 1/TPOT, the tokens after
    the first over the time they took (vLLM's `bench serve`, GuideLLM). Requests of one token
    have no decode phase and are left out. A median, not a mean: a request whose chunks
    arrived together has a decode time near zero and a rate in the tens of thousands, which
    would dominate a mean (docs/metrics.md)."""
    speeds = [
        (tokens - 1) / (e2e - ttft)
        for tokens, ttft, e2e in samples
        if tokens and tokens > 1 and ttft is not None and e2e is not None and e2e > ttft
    ]
    return median(speeds) if speeds else None


def _tiers(summary: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {k: v for k, v in summary.items() if isinstance(v, Mapping) and "ttft_s" in v}


def _ttft_ms(summaries: Sequence[Mapping[str, Any]], tier: str, q: str) -> float | None:
    values = [(_tiers(s).get(tier) or {}).get("ttft_s", {}).get(q) for s in summaries]
    mean = _mean(values)
    return None if mean is None else mean * 1000


def trial_metrics(
    run_summaries: Sequence[Mapping[str, Any]],
    gpu_count: int = 1,
    user_speeds: Sequence[float | None] | None = None,
) -> dict[str, Any]:
    """The trial's metrics from its runs' loadgen summaries (and each run's decode_speed)."""
    overall = [s.get(OVERALL) or {} for s in run_summaries]
    tiers = sorted({t for s in run_summaries for t in _tiers(s)})
    output_tps = _mean(o.get("output_throughput_tps") for o in overall)
    return {
        "throughput_rps": _mean(o.get("request_throughput_rps") for o in overall),
        "output_tokens_per_s": output_tps,
        "tokens_per_s_per_user": _mean(user_speeds or []),
        "tokens_per_s_per_gpu": None if output_tps is None else output_tps / max(gpu_count, 1),
        "error_rate": _mean(_unserved_rate(o) for o in overall),
        "ttft_p99_ms": {t: _ttft_ms(run_summaries, t, "p99") for t in tiers},
        "ttft_p50_ms": {t: _ttft_ms(run_summaries, t, "p50") for t in tiers},
        "requests": sum(int(o.get("count") or 0) for o in overall),
        "repeats": len(run_summaries),
    }


def _unserved_rate(overall: Mapping[str, Any]) -> float | None:
    """The share of requests not served: errors and, since loadgen counts them apart, those
    the gateway shed for overload (loadgen/stats.py, `is_shed`). A trial that sheds is not
    error-free to a sweep's max_error_rate."""
    rate = overall.get("error_rate")
    return None if rate is None else float(rate) + float(overall.get("shed_rate") or 0.0)


def _fmt(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


def evaluate(metrics: Mapping[str, Any], constraints: Constraints) -> tuple[bool, list[str]]:
    """Whether the trial meets every constraint, and a sentence naming each one it breaks."""
    violations: list[str] = []
    floor = constraints.min_throughput_rps
    if floor is not None:
        rps = metrics.get("throughput_rps")
        if rps is None or rps < floor:
            shown = "not measured" if rps is None else f"{_fmt(rps)} req/s"
            violations.append(f"throughput {shown} < floor {_fmt(floor)} req/s")
    max_errors = constraints.max_error_rate
    if max_errors is not None:
        rate = metrics.get("error_rate")
        if rate is None or rate > max_errors:
            shown = "not measured" if rate is None else f"{rate:.1%}"
            violations.append(f"error rate {shown} > max {max_errors:.1%}")
    measured = metrics.get("ttft_p99_ms") or {}
    for tier, cap in constraints.max_ttft_p99_ms.items():
        p99 = measured.get(tier)
        if p99 is None:
            violations.append(f"{tier} TTFT P99 not measured (cap {_fmt(cap)} ms)")
        elif p99 > cap:
            violations.append(f"{tier} TTFT P99 {_fmt(p99)} ms > cap {_fmt(cap)} ms")
    return not violations, violations


def objective_value(metrics: Mapping[str, Any], objective: str) -> float | None:
    """The figure the objective ranks by, lower being better (maxima negated)."""
    if objective == Objective.MIN_ONLINE_TTFT_P99:
        value = (metrics.get("ttft_p99_ms") or {}).get(ONLINE)
        return None if value is None else float(value)
    key = "throughput_rps" if objective == Objective.MAX_THROUGHPUT else "output_tokens_per_s"
    value = metrics.get(key)
    return None if value is None else -float(value)


def _dominates(a: tuple[float, float], b: tuple[float, float], sign: tuple[int, int]) -> bool:
    """a is at least as good as b on both axes and better on one."""
    better_or_equal = all(sign[k] * a[k] <= sign[k] * b[k] for k in (0, 1))
    return better_or_equal and any(sign[k] * a[k] < sign[k] * b[k] for k in (0, 1))


def pareto_front(points: Sequence[tuple[float, float]], minimize: tuple[bool, bool]) -> list[int]:
    """Indices of the points no other point dominates (each axis minimised or maximised), in
    their order. Equal points are all on the front."""
    sign = (1 if minimize[0] else -1, 1 if minimize[1] else -1)
    return [
        i
        for i, p in enumerate(points)
        if not any(_dominates(q, p, sign) for j, q in enumerate(points) if j != i)
    ]


def best_index(outcomes: Sequence[TrialOutcome]) -> int | None:
    """The feasible outcome with the lowest objective value (the first on a tie, so the base
    wins against an equal trial); None when none is feasible and measured."""
    candidates = [
        (o.objective_value, i)
        for i, o in enumerate(outcomes)
        if o.feasible and o.objective_value is not None
    ]
    return min(candidates)[1] if candidates else None


def winner_index(outcomes: Sequence[TrialOutcome], better: Sequence[bool]) -> int | None:
    """The best feasible outcome among those whose decision against the base is "better"
    (`better[i]`, decisions.py); None: no trial beats the base, whatever their objective
    values say (a lower figure inside the noise is not a win)."""
    chosen = [i for i, (o, b) in enumerate(zip(outcomes, better, strict=True)) if b]
    best = best_index([outcomes[i] for i in chosen])
    return None if best is None else chosen[best]
