"""How a finished run ends, from its samples (pure): its status and an error breakdown.

A run whose requests failed is not a success, whatever the task did: more than
MAX_ERROR_SHARE of its measured requests failed (or none completed) ends it as failed; fewer,
but some, as "completed with errors"; none, succeeded. The share and the commonest errors are
in the reason, so the list and the API say why without opening the run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from console.bench.choices import RunStatus
from loadgen import RequestSample

# More than this share of measured requests failed: the run failed (its figures describe the
# few that got through, not the target).
MAX_ERROR_SHARE = 0.05
# Kinds of error kept in a breakdown; the rest are summed into one "other" row.
MAX_KINDS = 20
# Numbers that differ from request to request (ports, ids, byte counts) would split one kind
# of error into many; they are masked in the grouping key, never in the example shown.
_VARYING = re.compile(r"\b(?:0x[0-9a-f]+|[0-9a-f]{8,}|\d+(?:\.\d+)?)\b", re.IGNORECASE)


def error_key(status: int | None, message: str) -> tuple[int | None, str]:
    return status, _VARYING.sub("N", message.strip())[:300]


def error_breakdown(samples: Sequence[RequestSample]) -> list[dict[str, Any]]:
    """Failed requests grouped by HTTP status and message: count and the first example of
    each kind (by send order), commonest first."""
    kinds: dict[tuple[int | None, str], dict[str, Any]] = {}
    for sample in sorted(samples, key=lambda s: (s.send_time, s.index)):
        if sample.ok:
            continue
        message = sample.error or ""
        key = error_key(sample.status, message)
        kind = kinds.get(key)
        if kind is None:
            kinds[key] = kind = {
                "status": sample.status,
                "message": message[:500],
                "count": 0,
                "warmup": 0,
                "first": {
                    "index": sample.index,
                    "tier": sample.tier,
                    "send_time": sample.send_time,
                },
            }
        kind["count"] += 1
        kind["warmup"] += int(sample.warmup)
    rows = sorted(kinds.values(), key=lambda k: (-k["count"], k["first"]["send_time"]))
    if len(rows) > MAX_KINDS:
        rest = rows[MAX_KINDS - 1 :]
        other = {
            "status": None,
            "message": f"{len(rest)} other kinds of error",
            "count": sum(r["count"] for r in rest),
            "warmup": sum(r["warmup"] for r in rest),
            "first": min((r["first"] for r in rest), key=lambda f: f["send_time"]),
        }
        rows = [*rows[: MAX_KINDS - 1], other]
    return rows


def run_outcome(
    samples: Sequence[RequestSample], max_error_share: float = MAX_ERROR_SHARE
) -> tuple[str, str]:
    """(status, reason) of a run that ran to its end (not cancelled, not crashed)."""
    measured = [s for s in samples if not s.warmup] or list(samples)
    if not measured:
        return RunStatus.FAILED, "no request was sent"
    failed = sum(1 for s in measured if not s.ok)
    if failed == 0:
        return RunStatus.SUCCEEDED, ""
    share = failed / len(measured)
    kinds = error_breakdown(measured)
    top = "; ".join(f"{_label(k)} ({k['count']})" for k in kinds[:2])
    text = f"{failed} of {len(measured)} requests failed ({share:.1%}): {top}"
    if failed == len(measured) or share > max_error_share:
        return RunStatus.FAILED, text
    return RunStatus.WITH_ERRORS, text


def _label(kind: dict[str, Any]) -> str:
    status = f"HTTP {kind['status']}" if kind["status"] else "no response"
    message = kind["message"][:120]
    return f"{status}: {message}" if message else status
