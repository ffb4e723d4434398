"""Pure statistics over request samples: summaries per tier, time series, validity flags.

Percentiles are nearest-rank (percentiles.py, docs/metrics.md): always a measured value.
Durations in the output are seconds; keys end in `_s` where that matters. Request throughput is
completed requests over the wall-clock span of the measured window (not seed 000's n / mean
latency).

A request the gateway shed for overload (`is_shed`: its 429 for a full queue, its 503 for the
sojourn bound; docs/admission.md, "Overload") is counted as `shed`, apart from `errors`: the
gateway answered as configured, and the operator weighs that against its latency. The client's
own validity (`validity`) still counts every request without an answer in its `error_rate`,
shed included: the latency figures describe the answered requests only.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from loadgen.percentiles import percentiles
from loadgen.spec import WorkloadSpec
from loadgen.types import ItlStats, RequestSample

PERCENTILES = (50, 90, 99)
OVERALL = "overall"
NO_TIER = "default"

# Bounds past which the client itself may have distorted the figures.
VALIDITY_BOUNDS = {
    "dispatch_lag_p99_s": 0.010,
    "dispatch_lag_max_s": 0.100,
    "loop_lag_p99_s": 0.010,
    "loop_lag_max_s": 0.100,
    "client_cpu_ratio": 0.85,  # of one core
    "error_rate": 0.05,
    "usage_missing": 0,
    # Shares of ITL gaps / first tokens whose chunks reached the socket in one TCP segment
    # (wire.py): above these, the figure is marked as not wire-true (`untrusted`).
    "itl_merged_share": 0.01,
    "ttft_merged_share": 0.01,
}


# The error codes of the gateway's refusals for overload, in its OpenAI-shaped error body
# (gpu_agent/errors.py), as its `tiergate_shed_total` counts them (docs/metrics.md).
SHED_STATUSES = (429, 503)
_SHED_CODE = re.compile(r'"code"\s*:\s*"(?:queue_full|queue_timeout)"')


def is_shed(sample: RequestSample) -> bool:
    """The gateway shed this request for overload: a 429 `queue_full` (the tier's queue was
    full) or a 503 `queue_timeout` (it waited out `queue_timeout_ms` or `shed_after_ms`).
    Another server's 429 or 503 (the engine busy or down) is an error."""
    error = sample.error
    return sample.status in SHED_STATUSES and error is not None and bool(_SHED_CODE.search(error))


def itl_stats(gaps: Sequence[float]) -> ItlStats:
    if not gaps:
        return ItlStats()
    arr = np.asarray(gaps, dtype=float)
    p50, p99 = percentiles(arr, [50, 99])
    return ItlStats(len(arr), float(arr.mean()), p50, p99, float(arr.max()))


def distribution(values: Iterable[float | None]) -> dict[str, float | None]:
    """count, mean, p50, p90, p99, max of the non-None values (None when there are none)."""
    arr = np.asarray([v for v in values if v is not None], dtype=float)
    if arr.size == 0:
        return {"count": 0, "mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    p50, p90, p99 = percentiles(arr, PERCENTILES)
    return {
        "count": int(arr.size),
        "mean": float(arr.mean()),
        "p50": p50,
        "p90": p90,
        "p99": p99,
        "max": float(arr.max()),
    }


def meets_slo(sample: RequestSample, slo_ttft_s: float | None, slo_tpot_s: float | None) -> bool:
    if not sample.ok:
        return False
    if slo_ttft_s is not None and (sample.ttft is None or sample.ttft > slo_ttft_s):
        return False
    return not (slo_tpot_s is not None and sample.tpot is not None and sample.tpot > slo_tpot_s)


def _itl_values(samples: Sequence[RequestSample]) -> tuple[list[float], str]:
    # Pool every gap when the raw lists are kept; otherwise each request's mean gap stands in
    # for its gaps (weighted by count), which keeps the mean exact but blunts the tails.
    if all(s.itl_raw is not None or s.itl.count == 0 for s in samples):
        return [g for s in samples for g in (s.itl_raw or ())], "raw"
    pooled: list[float] = []
    for s in samples:
        if s.itl_raw is not None:
            pooled.extend(s.itl_raw)
        elif s.itl.count and s.itl.mean is not None:
            pooled.extend([s.itl.mean] * s.itl.count)
    return pooled, "per_request_mean"


def _group_summary(
    samples: Sequence[RequestSample],
    span_s: float,
    slo_ttft_s: float | None,
    slo_tpot_s: float | None,
) -> dict[str, Any]:
    ok = [s for s in samples if s.ok]
    shed = sum(1 for s in samples if not s.ok and is_shed(s))
    errors = len(samples) - len(ok) - shed
    itl_values, itl_source = _itl_values(ok)
    output_tokens = sum(s.output_tokens or 0 for s in ok)
    reported = [s.reasoning_tokens for s in ok if s.reasoning_tokens is not None]
    per_s = (lambda n: n / span_s) if span_s > 0 else (lambda n: None)
    has_slo = slo_ttft_s is not None or slo_tpot_s is not None
    good = sum(meets_slo(s, slo_ttft_s, slo_tpot_s) for s in ok) if has_slo else None
    return {
        "count": len(samples),
        "completed": len(ok),
        "errors": errors,  # failed requests, not counting those shed
        "error_rate": errors / len(samples) if samples else 0.0,
        "shed": shed,  # refused by the gateway for overload (`is_shed`)
        "shed_rate": shed / len(samples) if samples else 0.0,
        "ttft_s": distribution(s.ttft for s in ok),
        "tpot_s": distribution(s.tpot for s in ok),
        "itl_s": distribution(itl_values),
        "itl_source": itl_source,
        "e2e_s": distribution(s.e2e for s in ok),
        "prompt_tokens": sum(s.prompt_tokens or 0 for s in ok),
        "output_tokens": output_tokens,
        # Of output_tokens, those the engine's usage reports as reasoning (None: not reported).
        "reasoning_tokens": sum(reported) if reported else None,
        "request_throughput_rps": per_s(len(ok)),
        "output_throughput_tps": per_s(output_tokens),
        "good_requests": good,
        "goodput_rps": per_s(good) if good is not None else None,
    }


def default_window(samples: Sequence[RequestSample]) -> tuple[float, float]:
    if not samples:
        return (0.0, 0.0)
    return (min(s.send_time for s in samples), max(s.end_time for s in samples))


def summarize(
    samples: Sequence[RequestSample],
    window: tuple[float, float] | None = None,
    *,
    slo_ttft_ms: float | None = None,
    slo_tpot_ms: float | None = None,
) -> dict[str, Any]:
    """Summary per tier plus "overall" of the measured (non-warmup) samples.

    `window` is the measured window in unix seconds; by default from the first send to the
    last completion of the given samples.
    """
    measured = [s for s in samples if not s.warmup]
    start, end = window if window is not None else default_window(measured)
    span = max(end - start, 0.0)
    slo_ttft_s = slo_ttft_ms / 1000 if slo_ttft_ms is not None else None
    slo_tpot_s = slo_tpot_ms / 1000 if slo_tpot_ms is not None else None
    by_tier: dict[str, list[RequestSample]] = defaultdict(list)
    for s in measured:
        by_tier[s.tier or NO_TIER].append(s)
    summary = {
        tier: _group_summary(group, span, slo_ttft_s, slo_tpot_s)
        for tier, group in sorted(by_tier.items())
    }
    summary[OVERALL] = _group_summary(measured, span, slo_ttft_s, slo_tpot_s)
    summary[OVERALL]["window_s"] = span
    return summary


def stage_summaries(
    samples: Sequence[RequestSample],
    stages: Sequence[tuple[int, float]],
    run_start: float,
    window: tuple[float, float],
    *,
    slo_ttft_ms: float | None = None,
    slo_tpot_ms: float | None = None,
) -> list[dict[str, Any]]:
    """One summary per step of a ladder (`stages`: (concurrency, seconds) pairs from
    `run_start`, unix): each over the requests sent during that step, and the step's span
    clipped to the measured window. Steps wholly inside the warmup are left out."""
    rows = []
    start = run_start
    for index, (concurrency, seconds) in enumerate(stages):
        end = start + seconds
        clipped = (max(start, window[0]), end)
        if clipped[1] > clipped[0]:
            mine = [s for s in samples if s.stage == index and not s.warmup]
            rows.append(
                {
                    "stage": index,
                    "concurrency": concurrency,
                    "window": list(clipped),
                    "summary": summarize(
                        mine, clipped, slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms
                    ),
                }
            )
        start = end
    return rows


def run_figures(
    spec: WorkloadSpec,
    samples: Sequence[RequestSample],
    started_at: float,
    window: tuple[float, float],
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """A run's summary, per-second series and stage ladder (empty without stages), under the
    spec's SLOs; the same for one process's run and for shards merged. Reads `itl_raw`, so
    call it before dropping the raw gaps."""
    slo = {"slo_ttft_ms": spec.slo_ttft_ms, "slo_tpot_ms": spec.slo_tpot_ms}
    ladder = [(st.concurrency, st.duration_s) for st in spec.stages]
    return (
        summarize(samples, window, **slo),
        timeseries(samples, window),
        stage_summaries(samples, ladder, started_at, window, **slo),
    )


def timeseries(
    samples: Sequence[RequestSample], window: tuple[float, float] | None = None
) -> list[dict[str, Any]]:
    """One row per second of the window, by completion time: completed, errors, shed, output
    tokens, TTFT p50/p99 of the requests completed in that second."""
    measured = [s for s in samples if not s.warmup]
    start, end = window if window is not None else default_window(measured)
    seconds = max(math.ceil(end - start), 0)
    buckets: list[list[RequestSample]] = [[] for _ in range(seconds)]
    for s in measured:
        slot = int(s.end_time - start)
        if 0 <= slot < seconds:
            buckets[slot].append(s)
        elif slot == seconds and seconds:
            buckets[-1].append(s)
    rows = []
    for i, bucket in enumerate(buckets):
        ttfts = [s.ttft for s in bucket if s.ok and s.ttft is not None]
        p50, p99 = percentiles(ttfts, [50, 99]) if ttfts else (None, None)
        shed = sum(1 for s in bucket if not s.ok and is_shed(s))
        rows.append(
            {
                "t": start + i,
                "second": i,
                "completed": sum(1 for s in bucket if s.ok),
                "errors": sum(1 for s in bucket if not s.ok) - shed,
                "shed": shed,
                "output_tokens": sum(s.output_tokens or 0 for s in bucket if s.ok),
                "ttft_p50_s": p50,
                "ttft_p99_s": p99,
            }
        )
    return rows


def validity(
    samples: Sequence[RequestSample],
    *,
    loop_lags: Sequence[float],
    cpu_s: float,
    wall_s: float,
    bounds: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The client's own health during the run, with `flags` naming every bound passed."""
    limits = {**VALIDITY_BOUNDS, **(bounds or {})}
    measured = [s for s in samples if not s.warmup]
    dispatch = distribution(s.dispatch_lag for s in measured)
    loop = distribution(loop_lags)
    ok = [s for s in measured if s.ok]
    mismatched = sum(1 for s in ok if not s.usage_missing and s.output_tokens != s.content_chunks)
    errors = len(measured) - len(ok)
    gaps = sum(s.itl.count for s in ok)
    firsts = [s for s in ok if s.ttft is not None]
    figures = {
        "dispatch_lag_p99_s": dispatch["p99"],
        "dispatch_lag_max_s": dispatch["max"],
        "loop_lag_p99_s": loop["p99"],
        "loop_lag_max_s": loop["max"],
        "client_cpu_ratio": cpu_s / wall_s if wall_s > 0 else None,
        "error_rate": errors / len(measured) if measured else 0.0,
        "usage_missing": sum(1 for s in ok if s.usage_missing),
        "itl_merged_share": sum(s.merged_gaps for s in ok) / gaps if gaps else None,
        "ttft_merged_share": (
            sum(s.first_token_merged for s in firsts) / len(firsts) if firsts else None
        ),
    }
    flags = [
        f"{name}={value:.4g} exceeds {limits[name]:g}"
        for name, value in figures.items()
        if value is not None and value > limits[name]
    ]
    return {
        **figures,
        "dispatch_lag_s": dispatch,
        "loop_lag_s": loop,
        "client_cpu_s": cpu_s,
        "wall_s": wall_s,
        # Informational: servers may merge tokens into one chunk, so this is not a flag.
        "chunk_usage_mismatch": mismatched,
        "bounds": limits,
        "flags": flags,
        "valid": not flags,
    }


def untrusted(validity: dict[str, Any]) -> dict[str, str]:
    """The summary figures (``ttft_s``, ``itl_s``, ...) that are not wire times in this run,
    each with the reason; pages and the CLI mark them instead of printing them plain."""
    limits = validity["bounds"]
    out: dict[str, str] = {}
    share = validity.get("itl_merged_share")
    if share is not None and share > limits["itl_merged_share"]:
        out["itl_s"] = (
            f"{share:.1%} of ITL gaps are between chunks that reached the client in one TCP "
            "segment (sent together, or merged by the kernel while the socket went unread "
            "for longer than the gap): those read 0 and the gap before each reads long"
        )
    share = validity.get("ttft_merged_share")
    if share is not None and share > limits["ttft_merged_share"]:
        out["ttft_s"] = (
            f"{share:.1%} of first tokens reached the client in one TCP segment with the next "
            "chunk (the socket went unread meanwhile): their TTFT may be late by up to a gap"
        )
    lagged = any(f.startswith("loop_lag") for f in validity["flags"])
    if validity.get("receive_times") == "read" and lagged:
        reason = "chunk times are the client's reads (no kernel stamps) and its loop lagged"
        for name in ("ttft_s", "itl_s", "e2e_s"):
            out.setdefault(name, reason)
    return out
