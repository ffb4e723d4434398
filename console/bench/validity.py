"""What a run's validity flags mean for a decision: one line per side, the detail behind it.

A flag (loadgen.stats.validity: dispatch lag, event-loop lag, client CPU, merged chunks, ...)
says the client may have distorted some figure. It matters to an operator only where it moves
a figure the decision reads (decisions.py), and only by as much as it can move it. So each
flag is mapped to the figures it touches and an upper bound of the shift:

- TTFT not a wire time (``untrusted["ttft_s"]``): first tokens merged with the next chunk are
  late by at most one gap (the tier's ITL P99); with read timestamps and a lagging event loop,
  by at most the loop's worst lag. The shift is that bound over the tier's TTFT P99;
- dispatch lag: requests sent late lower a closed loop's throughput by about the mean lag over
  the mean request time (E2E + lag);
- usage missing: output tokens uncounted for that share of requests (output tokens/s).
Everything else (client CPU, ITL merged chunks, error-rate flags, a run completed with errors:
the error and shed guardrails count those failures) stays in the detail. A side's line fires
only for shifts of at least MIN_SHIFT of a figure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from console.bench.choices import RunStatus
from console.bench.models import BenchmarkRun
from loadgen.stats import OVERALL

MIN_SHIFT = 0.01


def _get(mapping: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


def shifts(run: BenchmarkRun, used: Iterable[str]) -> list[tuple[str, float, str]]:
    """(figure label, relative shift bound, why) of each figure of `used` ("online.ttft_p99",
    "overall.rps", ...) that this run's flags can move."""
    validity, summary = run.validity or {}, run.summary or {}
    untrusted = validity.get("untrusted") or {}
    flags = validity.get("flags") or []
    out: list[tuple[str, float, str]] = []
    for key in used:
        tier, _, metric = key.partition(".")
        label = "TTFT P99" if tier == OVERALL else f"{tier} TTFT P99"
        if metric == "ttft_p99" and "ttft_s" in untrusted:
            p99 = _get(summary, tier, "ttft_s", "p99")
            bounds = []
            merged = validity.get("ttft_merged_share")
            if merged is not None and merged > _get(validity, "bounds", "ttft_merged_share"):
                gap = _get(summary, tier, "itl_s", "p99")
                if gap:
                    bounds.append((gap, f"{merged:.1%} of first tokens merged with the next chunk"))
            lag = validity.get("loop_lag_max_s")
            if validity.get("receive_times") == "read" and lag:
                bounds.append((lag, f"event-loop lag up to {lag * 1000:.0f} ms, read timestamps"))
            if p99 and bounds:
                bound, why = max(bounds)
                out.append((label, bound / p99, f"{why}: up to {bound * 1000:.1f} ms late"))
        elif metric in ("rps", "output_tps") and any(f.startswith("dispatch_lag") for f in flags):
            lag = _get(validity, "dispatch_lag_s", "mean")
            e2e = _get(summary, OVERALL, "e2e_s", "mean")
            if lag and e2e:
                name = "output tokens/s" if metric == "output_tps" else "request throughput"
                why = f"requests sent {lag * 1000:.1f} ms late on average"
                out.append((name, lag / (e2e + lag), why))
        if metric == "output_tps" and validity.get("usage_missing"):
            done = _get(summary, OVERALL, "completed") or 0
            share = validity["usage_missing"] / done if done else 0.0
            out.append(("output tokens/s", share, "the engine reported no token usage"))
    return out


def side_validity(name: str, runs: list[BenchmarkRun], used: Iterable[str]) -> dict[str, Any]:
    """{"line": the one sentence (empty when nothing moves a figure the decision reads),
    "details": every flag and status, "affects": whether the line fires}."""
    used = list(used)
    moves: list[str] = []
    details: list[str] = []
    for run in runs:
        validity = run.validity or {}
        flags = validity.get("flags") or []
        if flags:
            details.append(f"run #{run.pk} carries validity flags: {'; '.join(flags)}")
        for figure, reason in (validity.get("untrusted") or {}).items():
            label = figure.removesuffix("_s").upper()
            details.append(f"run #{run.pk}'s {label} is not a wire time: {reason}")
        if run.status != RunStatus.SUCCEEDED:
            details.append(f"run #{run.pk} {run.get_status_display().lower()}: {run.status_reason}")
        for label, shift, why in shifts(run, used):
            if shift >= MIN_SHIFT:
                moves.append(f"{label} by up to {shift:.1%} in run #{run.pk} ({why})")
    if moves:
        line = f"{name}: validity flags move a figure the decision reads: " + "; ".join(moves)
    elif details:
        line = ""
    else:
        return {"line": "", "details": [], "affects": False, "summary": ""}
    flagged = sum(1 for d in details if "carries validity flags" in d)
    summary = (
        f"{name}: {flagged} of {len(runs)} run{'' if len(runs) == 1 else 's'} carry validity "
        "flags" + ("" if moves else "; none moves a figure the decision reads by 1% or more")
    )
    if not flagged:
        summary = f"{name}: notes on {len(runs)} run{'' if len(runs) == 1 else 's'}"
    return {"line": line, "details": details, "affects": bool(moves), "summary": summary}
