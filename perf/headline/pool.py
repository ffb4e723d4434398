"""`python -m perf.headline.pool SET...`: paired rounds of several runs judged as one.

One run of `perf.headline --rounds N` judges an arm against the reference over its own N
rounds (rounds.py). On a real vLLM the per-round log ratio of online TTFT P99 spreads with a
standard deviation of about 0.3, so one run of 8-20 rounds cannot tell parity from a few per
cent either way; runs on the same layout can be pooled, since each round is a pair of its own
(the ratio of two arms that saw the same requests on the same machine at nearly the same
time) and the runs' rates and machines cancel within each pair.

A round set (JSON) is what pooling needs of one run, per round: the arm's online TTFT P99
ratio to the reference's, its throughput ratio where known, and whether the round was steady
(no arm's client fell behind its schedule by more than `MAX_CLIENT_STALL_S`; null where that
was not recorded). Sets exported since 5 December also keep, per round, the ratio of requests
finished inside the measured window (`done_ratio`: the engine's delivery rate, without the
drain after the window that requests per second counts), the ratio of output tokens streamed
inside it (`tokens_ratio`: the same without favouring an arm that finishes short requests in
the window and leaves long ones for the drain), and how many requests the
reference's engine held waiting on average (`reference_waiting`, from its /metrics: whether
the round was past the engine's knee, where the target is about); sets exported since
6 December also keep the batch and offline tiers' TTFT P99 ratios (`batch_p99_ratio`,
`offline_p99_ratio`: what the online figure costs the lower tiers). Two sources, both accepted
on the command line:
- a rounds record written by `perf.headline --rounds N --json FILE` (its `records`), or
- a round set, such as those in docs/rounds/: written by `--export` from a rounds record, or
  transcribed from docs/performance.md's tables for runs whose records were not kept (their
  `source` says so).

The pooled judgement: the geometric mean of every round's ratio with a paired t interval on
the logs (rounds.py `ratio_interval`), the issue's verdict (resolved only when the interval
excludes x1), and beside it a non-inferiority reading (the interval's upper end at most
`--margin`), with the rounds a difference of the pooled size would need before the interval
excluded x1. Throughput gets the same paired interval, by requests per second, by requests
done in the window and by output tokens streamed in it, and so do the lower tiers' TTFT
P99s. `--saturated W` keeps only the
rounds whose reference queued at least W requests on average. Pure functions, but for
`tokens_ratio_from_folder` (which `from_record` calls for records that lack the token figure);
`main` is the shell.
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
from console.bench.headline.arms import tokens_in_window
from loadgen import RunResult
from perf.headline.rounds import judge, paired_verdict, ratio_interval, steady_rounds

KIND = "headline round set"
DEFAULT_MARGIN = 1.15  # the margin proposed for the real-engine target (docs/performance.md)
LOWER_TIERS = ("batch", "offline")  # their TTFT P99 ratios ride along in a set, where recorded


class SetError(ValueError):
    """A file that is neither a rounds record nor a round set, or one without the arm."""


def from_record(
    record: dict[str, Any], arm: str, reference: str, name: str, **meta: Any
) -> dict[str, Any]:
    """The round set of `arm` against `reference` in a rounds record (pure)."""
    records = record["records"]
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise SetError(f"{name}: records: a list of rounds is required")
    if not records or arm not in records[0] or reference not in records[0]:
        arms = sorted(records[0]) if records else []
        raise SetError(f"{name}: arms {arms} lack --arm {arm} or --reference {reference}")
    per_round = judge(records, reference)[arm]["per_round"]
    steady_at = set(steady_rounds(records))  # rounds.py's rule: no client over the bound
    docs = record.get("docs")
    docs = docs if isinstance(docs, list) and len(docs) == len(records) else [None] * len(records)
    folders = record.get("round_workdirs")
    if not (isinstance(folders, list) and len(folders) == len(records)):
        folders = [None] * len(records)
    rounds = []
    for i, (result, arms, doc) in enumerate(zip(per_round, records, docs, strict=True)):
        window = window_figures(doc, arm, reference)
        if window["tokens_ratio"] is None and doc and folders[i]:
            window["tokens_ratio"] = tokens_ratio_from_folder(Path(folders[i]), arm, reference, doc)
        stalls = [a.get("client_stall_s") for a in arms.values()]
        stall = max((s for s in stalls if s is not None), default=None)
        # The rule reads a missing lag as none; here it is "not recorded" unless one arm stalled.
        steady = False if i not in steady_at else (True if None not in stalls else None)
        rounds.append(
            {
                "p99_ratio": result["p99_ratio"],
                "throughput_ratio": result["throughput_ratio"],
                "client_stall_s": stall,
                "steady": steady,
                **window,
            }
        )
    return {"kind": KIND, "name": name, "arm": arm, "reference": reference, **meta,
            "rounds": rounds}  # fmt: skip


def window_figures(doc: Any, arm: str, reference: str) -> dict[str, float | None]:
    """From one round's experiment document (the record's `docs`): the arm's requests done and
    output tokens streamed in the window over the reference's, its lower tiers' TTFT P99s over
    the reference's, and the reference engine's mean waiting count (pure; None for what the
    document does not hold)."""
    arms = {a.get("key"): a for a in (doc or {}).get("arms") or [] if isinstance(a, dict)}

    def ratio(field: str, tier: str = "overall") -> float | None:
        mine, ref = (
            (((arms.get(key) or {}).get("tiers") or {}).get(tier) or {}).get(field)
            for key in (arm, reference)
        )
        return mine / ref if _positive(mine) and _positive(ref) else None

    waiting = (((arms.get(reference) or {}).get("engine") or {}).get("engine_waiting") or {}).get(
        "mean"
    )
    return {
        "done_ratio": ratio("done_in_window_rps"),
        "tokens_ratio": ratio("tokens_in_window_tps"),
        **{f"{tier}_p99_ratio": ratio("ttft_p99_ms", tier) for tier in LOWER_TIERS},
        "reference_waiting": waiting if _number(waiting) and waiting >= 0 else None,
    }


def tokens_ratio_from_folder(
    folder: Path, arm: str, reference: str, doc: dict[str, Any]
) -> float | None:
    """For runs recorded before arms kept `tokens_in_window_tps`: the ratio from the round's
    folder (`arm-X.json`, every request), when it is still there (None when it is not)."""
    duration = ((doc.get("workload") or {}).get("duration_s")) or None
    paths = [folder / f"arm-{k}.json" for k in (arm, reference)]
    if not duration or not all(p.is_file() for p in paths):
        return None
    rates = []
    for path in paths:
        run = RunResult.from_json_dict(json.loads(path.read_text(encoding="utf-8")))
        rates.append(tokens_in_window(run.samples, run.window[0], float(duration)))
    return rates[0] / rates[1] if rates[0] > 0 and rates[1] > 0 else None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _positive(value: Any) -> bool:
    return _number(value) and value > 0


def as_set(doc: Any, arm: str, reference: str, name: str) -> dict[str, Any]:
    """A loaded JSON document as a round set of `arm` against `reference` (pure)."""
    if isinstance(doc, dict) and "records" in doc:
        return from_record(doc, arm, reference, name, rate_rps=doc.get("rate_rps"))
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise SetError(f"{name}: neither a rounds record (records) nor a {KIND} (kind)")
    if (doc.get("arm"), doc.get("reference")) != (arm, reference):
        raise SetError(
            f"{name}: arm: holds ({doc.get('arm')}) against ({doc.get('reference')}), "
            f"not ({arm}) against ({reference})"
        )
    rounds = doc.get("rounds")
    if not isinstance(rounds, list) or not rounds:
        raise SetError(f"{name}: rounds: a non-empty list is required")
    for i, r in enumerate(rounds, 1):
        if not isinstance(r, dict):
            raise SetError(f"{name}: rounds[{i}]: an object is required")
        ratio = r.get("p99_ratio")
        number = isinstance(ratio, int | float) and not isinstance(ratio, bool)
        if ratio is not None and not (number and ratio > 0):
            raise SetError(f"{name}: rounds[{i}].p99_ratio: a positive number or null")
        if r.get("steady") not in (True, False, None):
            raise SetError(f"{name}: rounds[{i}].steady: true, false or null")
        for key, check, what in (
            ("throughput_ratio", _positive, "a positive number or null"),
            ("done_ratio", _positive, "a positive number or null"),
            ("tokens_ratio", _positive, "a positive number or null"),
            *((f"{t}_p99_ratio", _positive, "a positive number or null") for t in LOWER_TIERS),
            ("reference_waiting", lambda v: _number(v) and v >= 0, "a number >= 0 or null"),
        ):
            if r.get(key) is not None and not check(r[key]):
                raise SetError(f"{name}: rounds[{i}].{key}: {what}")
    return {**doc, "name": doc.get("name") or name}


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
        "saturated": saturated,
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
        prog="python -m perf.headline.pool",
        description="Pool the paired rounds of several perf.headline runs into one judgement.",
    )
    p.add_argument(
        "sets",
        nargs="+",
        type=Path,
        metavar="SET",
        help="a rounds record (perf.headline --rounds N --json) or a round set",
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
