"""`python -m lab.headline --rounds N`: the headline arms N times, paired, and a verdict that
includes run-to-run noise.

One run of an arm is one draw of everything that varies between runs (engine state, the
machine's other load, the order requests met each other). On a real engine sharing two cores
with its clients, two identical gateway arms of one run differed by x1.26 in online TTFT P99
(docs/performance.md), as much as the margin of issue 16's target. So one run per arm cannot
settle "online P99 at most engine priority alone's"; N rounds can:

- round i replays workload seed `seed + i` in every arm (the arms of one round see the same
  requests), in the order given on odd rounds and reversed on even ones, so that drift over
  the session lands on every arm alike;
- round 1 finds the offered rate (`--load-factor` x the probed saturation) unless `--rate` is
  given, and the later rounds offer the same rate;
- each arm is judged against the reference arm (`--reference`, default b) by its online TTFT
  P99 ratio round by round: their geometric mean, with a paired t interval on their logs
  (`ratio_interval`). Beside it: the P99 of every round's online requests pooled, and the
  console's own unpaired run-level verdicts (console/bench/verdicts.py, a Welch interval over
  the rounds' P99s and throughputs), which ignore the pairing and so are wider.

A round in which any arm's client stalled (its largest dispatch lag over loadgen's own bound,
`MAX_CLIENT_STALL_S`: something else took the client's core, and the next seconds of that arm
measure the stall, not the arms) is judged again apart: the record's `steady` holds the
judgement over the other rounds, named beside the whole one, never in its place.

The targets (issue 16, against arm b): online TTFT P99 at most b's (the geometric mean of the
ratios at most 1) and throughput at least 0.95x b's (the ratio of the means). "resolved" says
whether the paired interval excludes 1.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import stats

from console.bench.choices import Verdict
from console.bench.comparison import CONFIDENCE, percentile
from console.bench.headline.arms import ArmOutcome
from console.bench.headline.catalog import Arm
from console.bench.headline.experiment import Options, run_experiment
from console.bench.verdicts import compare_percentile_runs, compare_statistic
from loadgen.stats import VALIDITY_BOUNDS

TIER = "online"
MAX_THROUGHPUT_LOSS = 0.05  # issue 16: throughput at least 0.95x
# A client that sent a request this late (s) was stalled by something else on its core.
MAX_CLIENT_STALL_S = VALIDITY_BOUNDS["dispatch_lag_max_s"]


def round_record(outcome: ArmOutcome, tier: str = TIER) -> dict[str, Any]:
    """What the verdict needs of one arm's run: the tier's TTFTs (s) and the throughput."""
    ttfts = [
        s.ttft
        for s in outcome.result.samples
        if s.ok and not s.warmup and s.tier == tier and s.ttft is not None
    ]
    overall = outcome.tier_row("overall")
    return {
        "ttft_s": ttfts,
        "throughput_rps": overall["request_throughput_rps"] or 0.0,
        "client_stall_s": outcome.result.validity.get("dispatch_lag_max_s"),
    }


def steady_rounds(
    rounds: Sequence[dict[str, dict[str, Any]]], max_stall_s: float = MAX_CLIENT_STALL_S
) -> list[int]:
    """The (0-based) rounds in which no arm's client stalled over `max_stall_s` (pure)."""
    return [
        i
        for i, arms in enumerate(rounds)
        if all((a.get("client_stall_s") or 0.0) <= max_stall_s for a in arms.values())
    ]


def ratio_interval(
    ratios: Sequence[float | None], confidence: float = CONFIDENCE
) -> tuple[float | None, tuple[float, float] | None]:
    """Paired rounds: the geometric mean of the per-round ratios and a t interval for it,
    taken on their logarithms (None with fewer than two usable rounds). Pairing removes what
    a round does to every arm alike (its workload, the machine's state then)."""
    logs = np.log([r for r in ratios if r is not None and r > 0 and math.isfinite(r)])
    if not logs.size:
        return None, None
    centre = float(np.exp(logs.mean()))
    if logs.size < 2:
        return centre, None
    if np.ptp(logs) == 0:  # every round the same ratio: no spread to put an interval on
        return centre, (centre, centre)
    span = stats.ttest_1samp(logs, 0.0).confidence_interval(confidence)
    return centre, (float(np.exp(span.low)), float(np.exp(span.high)))


def paired_verdict(interval: tuple[float, float] | None) -> str:
    if interval is None or interval[0] <= 1.0 <= interval[1]:
        return str(Verdict.NO_CLEAR_CHANGE)
    return str(Verdict.WORSE if interval[0] > 1.0 else Verdict.BETTER)


def judge(rounds: Sequence[dict[str, dict[str, Any]]], reference: str = "b") -> dict[str, Any]:
    """Each arm against `reference`, over rounds of `{arm key: round_record}` (pure)."""
    keys = [k for k in rounds[0] if k != reference] if rounds else []
    ref_runs = [np.asarray(r[reference]["ttft_s"], dtype=float) * 1000 for r in rounds]
    ref_rps = [r[reference]["throughput_rps"] for r in rounds]
    out: dict[str, Any] = {}
    for key in keys:
        runs = [np.asarray(r[key]["ttft_s"], dtype=float) * 1000 for r in rounds]
        rps = [r[key]["throughput_rps"] for r in rounds]
        p99 = compare_percentile_runs(ref_runs, runs, 99, f"{TIER} TTFT P99 (ms)")
        thr = compare_statistic(ref_rps, rps, "throughput (req/s)", higher_is_better=True)
        per_round = [
            {
                "p99_ratio": percentile(x, 99) / percentile(y, 99) if x.size and y.size else None,
                "throughput_ratio": b / a if a else None,
            }
            for x, y, b, a in zip(runs, ref_runs, rps, ref_rps, strict=True)
        ]
        pooled = (
            percentile(np.concatenate(runs), 99) / percentile(np.concatenate(ref_runs), 99)
            if sum(map(len, runs)) and sum(map(len, ref_runs))
            else None
        )
        geomean, interval = ratio_interval([r["p99_ratio"] for r in per_round])
        verdict = paired_verdict(interval)
        thr_ratio = thr.after / thr.before if thr.before and thr.after is not None else None
        out[key] = {
            "rounds": len(rounds),
            "per_round": per_round,
            "p99_ratio": geomean,
            "p99_ratio_interval": interval,
            "p99_verdict": verdict,
            "p99_ratio_pooled": pooled,
            "p99_unpaired": p99.as_dict(),
            "throughput_ratio": thr_ratio,
            "throughput": thr.as_dict(),
            "meets_target": (
                geomean is not None
                and geomean <= 1.0
                and thr_ratio is not None
                and thr_ratio >= 1 - MAX_THROUGHPUT_LOSS
            ),
            "resolved": verdict != Verdict.NO_CLEAR_CHANGE,
        }
    return out


def _fmt(value: float | None, spec: str = "{:.3f}") -> str:
    return "-" if value is None else spec.format(value)


def render_judgement(result: dict[str, Any], reference: str, rounds: str = "the rounds") -> str:
    lines = [f"## Over {rounds}, against ({reference}): {TIER} TTFT P99 and throughput"]
    for key, v in result.items():
        p99, interval = v["p99_unpaired"], v["p99_ratio_interval"]
        each = ", ".join(f"x{_fmt(r['p99_ratio'])}" for r in v["per_round"])
        span = "-" if interval is None else f"x{interval[0]:.3f} to x{interval[1]:.3f}"
        lines.append(
            f"arm ({key}), {v['rounds']} rounds: P99 x{_fmt(v['p99_ratio'])} of ({reference}) "
            f"(per round {each}; paired 95% interval {span}: {v['p99_verdict']}); pooled "
            f"x{_fmt(v['p99_ratio_pooled'])}; mean P99 {_fmt(p99['after'], '{:.0f}')} against "
            f"{_fmt(p99['before'], '{:.0f}')} ms ({p99['verdict']}, unpaired); throughput "
            f"x{_fmt(v['throughput_ratio'])} ({v['throughput']['verdict']}): "
            + ("meets" if v["meets_target"] else "misses")
            + f" the target (P99 <= ({reference})'s, throughput >= 0.95x)"
            + ("" if v["resolved"] else "; not resolved: the interval holds x1")
        )
    return "\n".join(lines)


def render_steady(steady: dict[str, Any], rounds: int, reference: str) -> str:
    """The judgement over the rounds without a stalled client, when some had one ("" if not)."""
    if steady["judgement"] is None:
        return ""
    kept = steady["rounds"]
    left = [i for i in range(1, rounds + 1) if i not in kept]
    stall = 1000 * steady["max_client_stall_s"]
    heading = (
        f"the {len(kept)} rounds whose client never stalled over {stall:.0f} ms "
        f"(left out: round {', '.join(map(str, left))})"
    )
    return render_judgement(steady["judgement"], reference, heading)


def round_arms(arms: str, index: int) -> str:
    """The arms' order in round `index` (0-based): as given, then reversed, alternately."""
    return arms if index % 2 == 0 else arms[::-1]


def run_rounds(
    opts: Options,
    rounds: int,
    reference: str = "b",
    log: Callable[[str], None] = print,
    on_round: Callable[[dict[str, Any]], None] | None = None,
    catalog: Sequence[Arm] | None = None,
) -> dict[str, Any]:
    """Run the experiment `rounds` times (see the module's docstring); the whole record.
    `on_round` gets the record of the rounds done so far after each one (`rounds_record`), so
    that a run cut short keeps what it measured; `catalog`: the arms (run_experiment's)."""
    if reference not in opts.arms:
        raise ValueError(f"--reference {reference}: not among --arms {opts.arms}")
    docs: list[dict[str, Any]] = []
    records: list[dict[str, dict[str, Any]]] = []
    rate = opts.rate
    for index in range(rounds):
        workdir = None if opts.workdir is None else opts.workdir / f"round-{index + 1}"
        round_opts = dataclasses.replace(
            opts, seed=opts.seed + index, rate=rate, arms=round_arms(opts.arms, index),
            workdir=workdir,
        )  # fmt: skip
        log(f"round {index + 1} of {rounds}: seed {round_opts.seed}, arms {round_opts.arms}")
        experiment = run_experiment(round_opts, log=log, catalog=catalog)
        rate = experiment.doc["workload"]["rate_rps"]
        docs.append(experiment.doc)
        records.append({o.arm.key: round_record(o) for o in experiment.outcomes})
        if on_round is not None:
            on_round(rounds_record(docs, records, reference, rate, rounds))
    return rounds_record(docs, records, reference, rate, rounds)


def rounds_record(
    docs: Sequence[dict[str, Any]],
    records: Sequence[dict[str, dict[str, Any]]],
    reference: str,
    rate: float | None,
    planned: int,
) -> dict[str, Any]:
    """The record of the rounds done (`docs`, `records`) of the `planned` ones (pure): what
    `--json` writes, after every round and at the end. A verdict needs two rounds."""
    result = judge(records, reference) if len(records) >= 2 else {}
    steady = steady_rounds(records)
    return {
        "experiment": "headline rounds: paired arms, run-level verdicts",
        "rounds": len(records),
        "rounds_planned": planned,
        "reference": reference,
        "rate_rps": rate,
        "judgement": result,
        # The rounds without a stalled client (1-based), judged apart when some were stalled.
        "steady": {
            "max_client_stall_s": MAX_CLIENT_STALL_S,
            "rounds": [i + 1 for i in steady],
            "judgement": (
                judge([records[i] for i in steady], reference)
                if len(steady) < len(records) and steady
                else None
            ),
        },
        # What the judgement read, per round and arm: judge(record["records"], "a") judges
        # against another arm afterwards.
        "records": list(records),
        "round_workdirs": [d["workdir"] for d in docs],
        "docs": list(docs),
    }
