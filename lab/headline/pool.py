"""`python -m lab.headline.pool SET...`: paired rounds of several runs judged as one.

One run of `lab.headline --rounds N` judges an arm against the reference over its own N
rounds (rounds.py). On a real vLLM the per-round log ratio of online TTFT P99 spreads with a
standard deviation of about 0.3, so one run of 8-20 rounds cannot tell parity from a few per
cent either way; runs on the same layout can be pooled, since each round is a pair of its own
(the ratio of two arms that saw the same requests on the same machine at nearly the same
time) and the runs' rates and machines cancel within each pair.

A round set (round_sets.py) is what pooling needs of one run, per round. Two sources, both
accepted on the command line:
- a rounds record written by `lab.headline --rounds N --json FILE` (its `records`), or
- a round set, such as those in lab/data/rounds/: written by `--export` from a rounds record, or
  transcribed from docs/performance.md's tables.

The pooled judgement: the geometric mean of every round's ratio with a paired t interval on
the logs (rounds.py `ratio_interval`), the issue's verdict (resolved only when the interval
excludes x1), and beside it a non-inferiority reading (the interval's upper end at most
`--margin`), with the rounds a difference of the pooled size would need before the interval
excluded x1. Throughput gets the same paired interval, by requests per second, by requests
done in the window and by output tokens streamed in it, and so do the lower tiers' TTFT
P99s. `--saturated W` keeps only the rounds whose reference queued at least W requests on
average.

Rounds that replay one workload (the same `workload` in their sets: two runs with the same
`--seed` and rate) are not independent samples of the workloads: where any repeat, the pool
also gives the online figure counted by workload (each workload's rounds averaged on the log
scale first, then the t interval over workloads). Pure functions; `main` is the shell.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from console.bench.comparison import CONFIDENCE
from lab.headline.round_sets import LOWER_TIERS, SetError, as_set, from_record
from lab.headline.rounds import paired_verdict, ratio_interval

DEFAULT_MARGIN = 1.15  # the margin proposed for the real-engine target (docs/performance.md)


def _kept(round_: dict[str, Any], steady_only: bool, saturated: float | None) -> bool:
    if steady_only and round_.get("steady") is False:
        return False
    waiting = round_.get("reference_waiting")
    return saturated is None or (waiting is not None and waiting >= saturated)


def pool(
    sets: Sequence[dict[str, Any]],
    steady_only: bool = False,
    margin: float = DEFAULT_MARGIN,
    confidence: float = CONFIDENCE,
    saturated: float | None = None,
) -> dict[str, Any]:
    """Every round of `sets` as one paired sample (pure). With `steady_only`, rounds known to
    be unsteady (`steady` false) are left out; rounds whose steadiness was not recorded stay.
    With `saturated`, only the rounds whose reference engine queued at least that many
    requests on average stay (rounds without the reading are left out)."""
    kept = [r for s in sets for r in s["rounds"] if _kept(r, steady_only, saturated)]
    ratios = [r["p99_ratio"] for r in kept if r.get("p99_ratio")]
    centre, interval = ratio_interval(ratios, confidence)
    logs = np.log(ratios) if ratios else np.array([])
    sd = float(logs.std(ddof=1)) if logs.size > 1 else None
    beside: dict[str, Any] = {}  # each figure kept beside the P99 (over the rounds that hold it)
    for figure in ("throughput", "done", "tokens", *(f"{t}_p99" for t in LOWER_TIERS)):
        values = [r[f"{figure}_ratio"] for r in kept if r.get(f"{figure}_ratio")]
        centre_, interval_ = ratio_interval(values, confidence)
        beside |= {f"{figure}_ratio": centre_, f"{figure}_ratio_interval": interval_,
                   f"{figure}_rounds": len(values)}  # fmt: skip
    verdict = "too few rounds" if interval is None else paired_verdict(interval)
    workloads = by_workload(kept, confidence)
    return {
        "sets": [s["name"] for s in sets],
        "rounds": len(ratios),
        "left_out": sum(len(s["rounds"]) for s in sets) - len(kept),
        "p99_ratio": centre,
        "p99_ratio_interval": interval,
        "p99_verdict": verdict,
        "log_sd": sd,
        "margin": margin,
        "non_inferior": interval is not None and interval[1] <= margin,
        "rounds_to_resolve": rounds_to_resolve(centre, sd, confidence),
        **beside,
        **workloads,
        "saturated": saturated,
    }


def by_workload(rounds: Sequence[dict[str, Any]], confidence: float = CONFIDENCE) -> dict[str, Any]:
    """The online P99 ratio counted by workload (pure): the rounds that name the same
    `workload` averaged on the log scale first (a round without one is a workload of its own),
    then the t interval over workloads. Its interval is None where no workload repeats."""
    groups: dict[object, list[float]] = {}
    for i, r in enumerate(rounds):
        if r.get("p99_ratio"):
            groups.setdefault(r.get("workload") or i, []).append(math.log(r["p99_ratio"]))
    repeated = sum(len(logs) for logs in groups.values() if len(logs) > 1)
    if not repeated:
        return {"workloads": len(groups), "replayed_rounds": 0, "by_workload_ratio": None,
                "by_workload_interval": None, "by_workload_verdict": None}  # fmt: skip
    means = [math.exp(sum(logs) / len(logs)) for logs in groups.values()]
    centre, interval = ratio_interval(means, confidence)
    verdict = "too few workloads" if interval is None else paired_verdict(interval)
    return {
        "workloads": len(groups),
        "replayed_rounds": repeated,
        "by_workload_ratio": centre,
        "by_workload_interval": interval,
        "by_workload_verdict": verdict,
    }


def rounds_to_resolve(
    centre: float | None, sd: float | None, confidence: float = CONFIDENCE, cap: int = 100_000
) -> int | None:
    """The fewest paired rounds whose t interval would exclude x1 if the geometric mean and
    the log sd stayed as measured (None at exactly x1 or without a spread; `cap` at most)."""
    if centre is None or sd is None or sd <= 0 or centre == 1.0:
        return None
    effect = abs(math.log(centre))
    n = 2
    while n < cap:
        if stats.t.ppf(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n) < effect:
            return n
        n = n + 1 if n < 1000 else int(n * 1.01)
    return cap


def _x(value: float | None) -> str:
    return "-" if value is None else f"x{value:.3f}"


def _span(interval: Sequence[float] | None) -> str:
    return "-" if interval is None else f"{_x(interval[0])} to {_x(interval[1])}"


def render(pooled: dict[str, Any], arm: str, reference: str) -> str:
    span = _span(pooled["p99_ratio_interval"])
    regime = (
        ""
        if pooled["saturated"] is None
        else f" whose ({reference}) engine queued at least {pooled['saturated']:g} on average"
    )
    why = "unsteady" if pooled["saturated"] is None else "unsteady or unsaturated"
    sd = "-" if pooled["log_sd"] is None else f"{pooled['log_sd']:.3f}"
    need = pooled["rounds_to_resolve"]
    lines = [
        f"## ({arm}) against ({reference}) over {pooled['rounds']} paired rounds of "
        f"{', '.join(pooled['sets'])}{regime}"
        + (f" ({pooled['left_out']} {why} rounds left out)" if pooled["left_out"] else ""),
        f"online TTFT P99: {_x(pooled['p99_ratio'])} (paired 95% interval {span}; log sd {sd}):"
        f" {pooled['p99_verdict']}",
        f"non-inferior within {_x(pooled['margin'])} (upper end at most the margin): "
        + ("yes" if pooled["non_inferior"] else "no"),
        "rounds a ratio this far from x1 would need to be resolved at this spread: "
        + ("-" if need is None else str(need)),
        *(
            [
                f"online TTFT P99 counted by workload: {_x(pooled['by_workload_ratio'])} "
                f"(paired 95% interval {_span(pooled['by_workload_interval'])}; over "
                f"{pooled['workloads']} workloads, {pooled['replayed_rounds']} rounds replaying "
                f"one): {pooled['by_workload_verdict']}"
            ]
            if pooled["replayed_rounds"]
            else []
        ),
        f"throughput: {_x(pooled['throughput_ratio'])} (paired 95% interval "
        f"{_span(pooled['throughput_ratio_interval'])}; over the {pooled['throughput_rounds']} "
        "rounds that recorded it)",
        f"requests done in the window: {_x(pooled['done_ratio'])} (paired 95% interval "
        f"{_span(pooled['done_ratio_interval'])}; over the {pooled['done_rounds']} rounds that "
        "recorded it)",
        f"output tokens streamed in the window: {_x(pooled['tokens_ratio'])} (paired 95% "
        f"interval {_span(pooled['tokens_ratio_interval'])}; over the {pooled['tokens_rounds']} "
        "rounds that recorded it)",
        *(
            f"{tier} TTFT P99: {_x(pooled[f'{tier}_p99_ratio'])} (paired 95% interval "
            f"{_span(pooled[f'{tier}_p99_ratio_interval'])}; over the "
            f"{pooled[f'{tier}_p99_rounds']} rounds that recorded it)"
            for tier in LOWER_TIERS
        ),
    ]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m lab.headline.pool",
        description="Pool the paired rounds of several lab.headline runs into one judgement.",
    )
    p.add_argument(
        "sets",
        nargs="+",
        type=Path,
        metavar="SET",
        help="a rounds record (lab.headline --rounds N --json) or a round set",
    )
    p.add_argument("--arm", default="d", help="the arm judged (default d)")
    p.add_argument("--reference", default="b", help="the arm it is judged against (default b)")
    p.add_argument(
        "--steady",
        action="store_true",
        help="leave out the rounds known to have had a stalled client",
    )
    p.add_argument(
        "--saturated",
        type=float,
        metavar="W",
        help="keep only the rounds whose reference engine queued at least W requests on "
        "average (from its /metrics; rounds without the reading are left out)",
    )
    p.add_argument(
        "--margin",
        type=float,
        default=DEFAULT_MARGIN,
        help="the non-inferiority margin for the interval's upper end (default 1.15)",
    )
    p.add_argument(
        "--export",
        type=Path,
        metavar="OUT",
        help="with one rounds record: write its round set to OUT (a new file)",
    )
    p.add_argument("--name", help="--export: the set's name (default: the record's file stem)")
    p.add_argument(
        "--meta",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="--export: a field to keep with the set (layout, command, when, ...)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.margin <= 1.0:
        parser.error(f"--margin {args.margin}: must be above 1")
    if args.saturated is not None and not (math.isfinite(args.saturated) and args.saturated >= 0):
        parser.error(f"--saturated {args.saturated}: a number of requests, at least 0")
    if args.export is not None and len(args.sets) != 1:
        parser.error("--export: give exactly one rounds record")
    if any(not m.partition("=")[0] or "=" not in m for m in args.meta):
        parser.error("--meta: KEY=VALUE")
    meta = dict(m.partition("=")[::2] for m in args.meta)
    sets = []
    for path in args.sets:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if args.export is not None:
                if not (isinstance(doc, dict) and "records" in doc):
                    raise SetError(f"{path}: --export needs a rounds record")
                doc = from_record(
                    doc,
                    args.arm,
                    args.reference,
                    args.name or path.stem,
                    rate_rps=doc.get("rate_rps"),
                    **meta,
                )
            sets.append(as_set(doc, args.arm, args.reference, path.stem))
        except (OSError, json.JSONDecodeError, SetError) as exc:
            parser.error(str(exc))
    if args.export is not None:
        try:
            with args.export.open("x", encoding="utf-8") as out:  # never over an existing file
                out.write(json.dumps(sets[0], indent=1) + "\n")
        except FileExistsError:
            parser.error(f"--export {args.export}: exists; nothing was written")
        except OSError as exc:
            parser.error(f"--export {args.export}: {exc.strerror}; nothing was written")
    pooled = pool(sets, args.steady, args.margin, saturated=args.saturated)
    print(render(pooled, args.arm, args.reference))
    return 0


if __name__ == "__main__":
    sys.exit(main())
