"""Both sides of a comparison: one run or a series of repeats each, read from the database.

A side is named `<run id>` or `s<series id>` (the compare page's and the API's `a`, `b`).
compare_sides gives the decision (decisions.py, over the figures of figures.py: overall and
per tier, from a declared objective and guardrails), per tier a run-level verdict on every
metric (verdicts.py: the evidence behind it), the config diff of the sides' first runs, the run
conditions that differ (prefix cache, preemptions, load), each side's validity flags grouped
into one line (validity.py) and the few warnings an operator should read first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from console.bench import figures
from console.bench.choices import COMPARABLE, Verdict
from console.bench.comparison import METRICS
from console.bench.decisions import PRIOR_RUN_CV
from console.bench.models import BenchmarkRun, RunSeries
from console.bench.results import Arrays, config_diff, finite, sample_arrays
from console.bench.sweeps.choices import Objective
from console.bench.validity import side_validity
from console.bench.verdicts import (
    compare_percentile_runs,
    compare_statistic,
    per_metric_confidence,
)
from console.core.ids import parse_id
from console.core.tiers import tier_sort_key
from loadgen.stats import OVERALL

THROUGHPUT = ("request_throughput_rps", "output_throughput_tps")
# Differences in run conditions worth a row's highlight on the compare page.
HIT_RATE_GAP = 0.05
LOAD_GAP_PER_CPU = 0.5


class SideError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


@dataclass
class Side:
    ref: str  # "12" or "s3"
    label: str
    runs: list[BenchmarkRun]
    series: RunSeries | None = None
    total: int = 1  # runs in all, finished or not (a series')


def parse_ref(field: str, raw: str) -> tuple[bool, int]:
    """(is a series, id) of a side's reference; a malformed id is the one IdError every page
    and API answers with a 400 naming the field."""
    if not raw:
        raise SideError(field, "required: a run id, or s<id> for a series of repeats")
    is_series = raw[:1] == "s"
    return is_series, parse_id(raw[1:] if is_series else raw, field)


def resolve_all(refs: dict[str, str]) -> dict[str, Side]:
    """Every side, each reference checked before any is looked up."""
    parsed = {field: parse_ref(field, raw) for field, raw in refs.items()}
    return {field: _side(field, raw, *parsed[field]) for field, raw in refs.items()}


def resolve(field: str, raw: str) -> Side:
    """A side from its reference; errors name the field."""
    return _side(field, raw, *parse_ref(field, raw))


def _side(field: str, raw: str, is_series: bool, pk: int) -> Side:
    qs = BenchmarkRun.objects.select_related("endpoint")
    if is_series:
        series = RunSeries.objects.filter(pk=pk).first()
        if series is None:
            raise SideError(field, f"no series with id {pk}")
        runs = list(qs.filter(series=series).order_by("pk"))
        done = [r for r in runs if r.status in COMPARABLE]
        label = f"series {series.pk}: {len(done)} of {len(runs)} runs finished"
        return Side(raw, label, done, series, len(runs))
    run = qs.filter(pk=pk).first()
    if run is None:
        raise SideError(field, f"no run with id {pk}")
    return Side(raw, f"#{run.pk}", [run])


def pooled(arrays: Sequence[Arrays]) -> Arrays:
    """Every run's samples of a side together, for the charts."""
    out: Arrays = {}
    for per_run in arrays:
        for tier, columns in per_run.items():
            into = out.setdefault(tier, {})
            for name, values in columns.items():
                into[name] = np.concatenate([into[name], values]) if name in into else values
    return out


def slos_of(a: Side, b: Side) -> dict[str, float]:
    """The TTFT P99 cap a decision holds every tier to: side A's run's `slo_ttft_ms` (B's
    when A's runs name none), in seconds; {} without one."""
    for run in (*a.runs, *b.runs):
        slo = (run.workload or {}).get("slo_ttft_ms")
        if slo:
            return {figures.ANY_TIER: float(slo) / 1000}
    return {}


def compare_sides(
    a: Side,
    b: Side,
    arrays: tuple[list[Arrays], list[Arrays]] | None = None,
    *,
    objective: str | None = None,
    slos: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The comparison of two sides; `objective` (an Objective value) and `slos` (TTFT P99 caps
    in seconds per tier, figures.ANY_TIER for all) declare what the decision judges by."""
    arrays_a, arrays_b = arrays or (
        [sample_arrays(r) for r in a.runs],
        [sample_arrays(r) for r in b.runs],
    )
    objective = figures.objective_of(objective)
    run_figures = (
        [figures.run_figures(r, x) for r, x in zip(a.runs, arrays_a, strict=True)],
        [figures.run_figures(r, x) for r, x in zip(b.runs, arrays_b, strict=True)],
    )
    decisions = figures.decide_sides(
        objective, *run_figures, slos if slos is not None else slos_of(a, b)
    )
    tiers = sorted({t for x in (*arrays_a, *arrays_b) for t in x}, key=tier_sort_key)
    result: dict[str, Any] = {}
    level = per_metric_confidence(len(METRICS) + len(THROUGHPUT))
    for tier in tiers:
        metrics: list[dict[str, Any]] = []
        for key, field, q in METRICS:
            runs_a = [finite(x[tier][field]) for x in arrays_a if tier in x]
            runs_b = [finite(x[tier][field]) for x in arrays_b if tier in x]
            metrics.append(
                compare_percentile_runs(runs_a, runs_b, q, key, confidence=level).as_dict()
            )
        for key in THROUGHPUT:
            values_a = _summary_values(a.runs, tier, key)
            values_b = _summary_values(b.runs, tier, key)
            metrics.append(
                compare_statistic(
                    values_a, values_b, key, higher_is_better=True, confidence=level
                ).as_dict()
            )
        decision = decisions.get(tier)
        result[tier] = {
            # The tier's decision (decisions.py) supersedes a vote of its metrics' verdicts.
            "overall": decision.outcome if decision else Verdict.NOT_ENOUGH_DATA,
            "decision": decision.as_dict() if decision else None,
            "metrics": metrics,
            "throughput": _throughput(a.runs, b.runs, tier),
        }
    overall = decisions[OVERALL]
    used = [e.key for e in (*overall.objectives, *overall.guardrails)]
    diff = config_diff(a.runs[0], b.runs[0]) if a.runs and b.runs else []
    validity = {name: side_validity(name, side.runs, used) for name, side in (("A", a), ("B", b))}
    return {
        "a": a.runs[0].pk if a.runs else None,
        "b": b.runs[0].pk if b.runs else None,
        "side_a": _side_dict(a),
        "side_b": _side_dict(b),
        "objective": {"value": objective, "label": str(Objective(objective).label)},
        "decision": overall.as_dict(),
        "provisional": min(len(a.runs), len(b.runs)) < 2,
        "confidence": level,
        "tiers": result,
        "config_diff": diff,
        "conditions": condition_rows(a.runs, b.runs),
        "validity": validity,
        "notes": notes(a, b, diff),
        "warnings": notes(a, b, diff) + [v["line"] for v in validity.values() if v["line"]],
    }


def compare_runs(a: BenchmarkRun, b: BenchmarkRun) -> dict[str, Any]:
    """Two single runs (a provisional comparison)."""
    return compare_sides(Side(str(a.pk), f"#{a.pk}", [a]), Side(str(b.pk), f"#{b.pk}", [b]))


def _side_dict(side: Side) -> dict[str, Any]:
    return {
        "ref": side.ref,
        "label": side.label,
        "series": side.series.pk if side.series else None,
        "runs": [r.pk for r in side.runs],
        "total": side.total,
    }


def _summary_values(runs: Sequence[BenchmarkRun], tier: str, key: str) -> list[float]:
    values = [((r.summary or {}).get(tier) or {}).get(key) for r in runs]
    return [float(v) for v in values if v is not None]


def _throughput(a: Sequence[BenchmarkRun], b: Sequence[BenchmarkRun], tier: str) -> dict[str, Any]:
    out = {}
    for key in (*THROUGHPUT, "goodput_rps", "error_rate"):
        va, vb = _summary_values(a, tier, key), _summary_values(b, tier, key)
        before = float(np.mean(va)) if va else None
        after = float(np.mean(vb)) if vb else None
        delta = after - before if before is not None and after is not None else None
        out[key] = {"before": before, "after": after, "delta": delta}
    return out


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None


def condition_rows(a: Sequence[BenchmarkRun], b: Sequence[BenchmarkRun]) -> list[dict[str, Any]]:
    """Prefix-cache hit rate, preemptions, loads: each side's mean over its runs, and whether
    they differ enough to explain a difference in latency."""

    def side(runs: Sequence[BenchmarkRun]) -> dict[str, Any]:
        conds = [r.conditions or {} for r in runs]
        engine = [c.get("engine") or {} for c in conds]
        return {
            "prefix_hit_rate": _mean([e.get("prefix_hit_rate") for e in engine]),
            "preemptions": _mean([e.get("preemptions") for e in engine]),
            "target_load1": _mean([(c.get("target_load") or {}).get("load1_after") for c in conds]),
            "client_load1": _mean([(c.get("client_load") or {}).get("load1_after") for c in conds]),
            "cpus": next((c["client_load"]["cpus"] for c in conds if c.get("client_load")), None),
            "reset": sorted({str(c.get("prefix_cache_reset")) for c in conds if c}),
        }

    sa, sb = side(a), side(b)
    cpus = sa["cpus"] or sb["cpus"] or 1
    gaps = {
        "prefix_hit_rate": HIT_RATE_GAP,
        "preemptions": 0.5,
        "target_load1": LOAD_GAP_PER_CPU * cpus,
        "client_load1": LOAD_GAP_PER_CPU * cpus,
    }
    rows = []
    for key, gap in gaps.items():
        va, vb = sa[key], sb[key]
        differs = va is not None and vb is not None and abs(vb - va) >= gap
        rows.append({"name": key, "a": va, "b": vb, "differs": differs})
    rows.append(
        {
            "name": "prefix_cache_reset",
            "a": ", ".join(sa["reset"]) or None,
            "b": ", ".join(sb["reset"]) or None,
            "differs": sa["reset"] != sb["reset"],
        }
    )
    return rows


def notes(a: Side, b: Side, diff: list[dict[str, Any]]) -> list[str]:
    """What to read with the decision: a side with nothing to compare, a side of one run, an
    A/A comparison. The comparison's "warnings" add each side's validity line where a flag
    moves a figure the decision reads (the flags' detail: "validity")."""
    out = []
    for name, side in (("A", a), ("B", b)):
        if not side.runs:
            out.append(f"{name}: no finished run to compare yet")
    if a.runs and b.runs and min(len(a.runs), len(b.runs)) == 1:
        out.append(
            "Provisional: a side has one run, so run-to-run noise is assumed "
            f"({PRIOR_RUN_CV:.0%} of a figure), not measured. Repeat both sides (3 runs or "
            "more) before acting on it."
        )
    if a.runs and b.runs and not diff:
        out.append(
            "Both sides have the same configuration and workload: this is an A/A comparison, "
            "and a better/worse decision is noise (expected in under 5% of comparisons)."
        )
    return out


def clear_verdicts(comparison: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(tier, metric, verdict) of every better/worse verdict: what an A/A check looks for."""
    return [
        (tier, m["metric"], m["verdict"])
        for tier, data in comparison["tiers"].items()
        for m in data["metrics"]
        if m["verdict"] in (Verdict.BETTER, Verdict.WORSE)
    ]
