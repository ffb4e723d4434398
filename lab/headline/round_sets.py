"""Round sets: what pooling needs of one `lab.headline --rounds N` run, per round.

A round set (JSON, `kind` "headline round set") keeps, per round, the arm's online TTFT P99
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
`offline_p99_ratio`: what the online figure costs the lower tiers) and the round's
`workload`: which requests it sent (the workload seed, rate, durations, engine and time
scale). Two rounds with the same `workload` are replays of the same requests: lab.headline
replays seed `seed + i` in round i, so two runs with the same `--seed` and rate send the same
requests, and a pool counts such rounds as one workload where it says so (pool.py).

Sets come from a rounds record written by `lab.headline --rounds N --json FILE` (its
`records`; `from_record`), or are transcribed from docs/performance.md's tables for runs whose
records were not kept (their `source` says so). `as_set` checks either, field by field. Pure
functions, but for `tokens_ratio_from_folder` (which `from_record` calls for records that lack
the token figure).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from console.bench.headline.arms import tokens_in_window
from lab.headline.rounds import judge, steady_rounds
from loadgen import RunResult

KIND = "headline round set"
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
                "workload": workload_of(doc),
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


def workload_of(doc: Any) -> str | None:
    """Which requests a round sent, from its experiment document's options (pure; None where
    they are not recorded): rounds with the same string replayed the same requests."""
    options = (doc or {}).get("options") if isinstance(doc, dict) else None
    if not isinstance(options, dict):
        return None
    fields = [options.get(k) for k in ("seed", "rate", "duration_s", "warmup_s", "time_scale")]
    if fields[1] is None:  # a probed rate (--load-factor): the rate the arms were offered
        fields[1] = (doc.get("workload") or {}).get("rate_rps")
    if not all(_number(f) for f in fields) or not isinstance(options.get("engine"), str):
        return None
    seed, rate, duration, warmup, scale = (f"{f:.15g}" for f in fields)  # exact: no two alike
    engine = options["engine"]
    return f"seed {seed} at {rate} req/s, {warmup}+{duration} s, {engine} at time scale {scale}"


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
        workload = r.get("workload")
        if workload is not None and not (isinstance(workload, str) and workload.strip()):
            raise SetError(f"{name}: rounds[{i}].workload: a non-empty string or null")
    return {**doc, "name": doc.get("name") or name}
