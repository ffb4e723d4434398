"""The windows' figures (lab.engine_windows), pure: each window judged against the nearest
windows of a reference kind, per-kind summaries, the A/A reading, and one kind pooled over
runs with an interval."""

from __future__ import annotations

import math
import statistics
from typing import Any

from lab.headline.rounds import ratio_interval


def paired(
    rows: list[dict[str, Any]], a_a: bool = False, key: str = "engine_tps", reference: str = "d"
) -> list[dict[str, Any]]:
    """Each window that is not of the `reference` kind (d) with its ratio to the mean `key`
    (engine rate) of the nearest reference window before it and after it (one of them at the
    ends; pure). `a_a`: each reference window instead, against the nearest other ones: the
    same path judged against itself, which should come out as no change."""
    direct = [(i, r.get(key)) for i, r in enumerate(rows) if r["kind"] == reference]
    out = []
    for i, row in enumerate(rows):
        if (row["kind"] == reference) != a_a or not row.get(key):
            continue
        before = [v for j, v in direct if j < i and v][-1:]
        after = [v for j, v in direct if j > i and v][:1]
        near = before + after
        if near:
            out.append({**row, "ratio": row[key] / statistics.fmean(near)})
    return out


RATES = {"engine_tps": "", "computed_tps": "computed_", "steps_ps": "steps_"}  # key: prefix


def summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per kind: windows, mean engine tokens/s, and (not d) the geometric mean of the paired
    ratios with their range; the same for the computed tokens and the steps (pure)."""
    judged = {key: paired(rows, key=key) for key in RATES}
    out: dict[str, dict[str, Any]] = {}
    for kind in dict.fromkeys(r["kind"] for r in rows):
        rates = [r["engine_tps"] for r in rows if r["kind"] == kind and r["engine_tps"]]
        mean = statistics.fmean(rates) if rates else None
        out[kind] = {"windows": len(rates), "engine_tps_mean": mean}
        for key, prefix in RATES.items():
            mine = [row["ratio"] for row in judged[key] if row["kind"] == kind]
            out[kind].update({prefix + name: v for name, v in _spread(mine).items()})
    return out


def direct_a_a(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The A/A reading: the (d) windows judged as the others are (paired with a_a; pure)."""
    mine = [row["ratio"] for row in paired(rows, a_a=True)]
    return {"windows": len(mine), **_spread(mine)}


def pooled(
    runs: list[list[dict[str, Any]]], kind: str, key: str = "engine_tps", reference: str = "d"
) -> dict[str, Any]:
    """One kind's windows over several runs, each judged within its own run against the
    `reference` kind (kind == reference: the A/A case), as one geometric mean with a t interval
    on the logarithms (the headline's paired rounds' ratio_interval; pure)."""
    ratios = [
        row["ratio"]
        for rows in runs
        for row in paired(rows, a_a=kind == reference, key=key, reference=reference)
        if row["kind"] == kind
    ]
    centre, interval = ratio_interval(ratios)
    return {"kind": kind, "key": key, "windows": len(ratios), "ratio": centre,
            "interval": list(interval) if interval else None}  # fmt: skip


def _spread(ratios: list[float]) -> dict[str, Any]:
    """The geometric mean of ratios and their range (None for none)."""
    if not ratios:
        return {"ratio_to_direct": None, "ratio_range": None}
    mean = math.exp(statistics.fmean(map(math.log, ratios)))
    return {"ratio_to_direct": mean, "ratio_range": [min(ratios), max(ratios)]}
