"""Reading a stored run back: sample arrays per tier, joined telemetry, config diff, exports."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import numpy as np
from django.utils import timezone

from console.bench.models import BenchmarkRun, RequestSample
from console.fleet.models import TelemetrySample
from console.tuning.diffs import dict_diff, launch_args_diff, tier_config_diff
from loadgen.stats import NO_TIER, OVERALL

LATENCY_FIELDS = ("ttft", "tpot", "e2e")
# Telemetry a little either side of the run, so the charts show the load arriving and leaving.
TELEMETRY_MARGIN = timedelta(seconds=5)
# The columns of one request sample, in the CSV export and the API alike.
SAMPLE_FIELDS = [
    "index",
    "tier",
    "stage",
    "warmup",
    "send_time",
    "dispatch_lag",
    "ttft",
    "tpot",
    "e2e",
    "itl_count",
    "itl_mean",
    "itl_p50",
    "itl_p99",
    "itl_max",
    "prompt_tokens",
    "output_tokens",
    "usage_missing",
    "status",
    "error",
]

Arrays = dict[str, dict[str, np.ndarray]]


def sample_arrays(run: BenchmarkRun) -> Arrays:
    """{tier: {"ttft": values, "tpot": ..., "e2e": ...}} of the measured, successful requests,
    plus "overall". NaN marks a missing value (e.g. TPOT of a one-token answer)."""
    rows = RequestSample.objects.filter(run=run, warmup=False, error="").values_list(
        "tier", *LATENCY_FIELDS
    )
    by_tier: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows.iterator(chunk_size=5000):
        by_tier[row[0] or NO_TIER].append(row[1:])
    out: Arrays = {}
    everything: list[tuple[Any, ...]] = []
    for tier, values in sorted(by_tier.items()):
        out[tier] = _columns(values)
        everything.extend(values)
    out[OVERALL] = _columns(everything)
    return out


def _columns(values: list[tuple[Any, ...]]) -> dict[str, np.ndarray]:
    matrix = np.array(values, dtype=float).reshape(-1, len(LATENCY_FIELDS))
    return {name: matrix[:, i] for i, name in enumerate(LATENCY_FIELDS)}


def finite(values: np.ndarray) -> np.ndarray:
    return values[~np.isnan(values)]


def telemetry_rows(run: BenchmarkRun) -> list[dict[str, Any]]:
    """The target nodes' samples over the run (GPU util, KV use, queue depth), oldest first."""
    if not run.node_ids or run.started_at is None:
        return []
    end = run.finished_at or timezone.now()
    rows = (
        TelemetrySample.objects.filter(
            node_id__in=run.node_ids,
            ts__gte=run.started_at - TELEMETRY_MARGIN,
            ts__lte=end + TELEMETRY_MARGIN,
        )
        .order_by("ts")
        .values("node__name", "ts", "gpu_util", "kv_cache_usage", "queue_depth", "gpu_source")
    )
    return [
        {**r, "node": r["node__name"], "t": (r["ts"] - run.started_at).total_seconds()}
        for r in rows
    ]


def config_diff(a: BenchmarkRun, b: BenchmarkRun) -> list[dict[str, Any]]:
    """What differs between the two runs' targets and workloads, one row per changed leaf.
    Nodes are paired in order, so a run on node 1 compares with one on node 2."""
    rows: list[dict[str, Any]] = []
    nodes_a = (a.config_snapshot or {}).get("nodes", [])
    nodes_b = (b.config_snapshot or {}).get("nodes", [])
    for i in range(max(len(nodes_a), len(nodes_b))):
        na = nodes_a[i] if i < len(nodes_a) else {}
        nb = nodes_b[i] if i < len(nodes_b) else {}
        prefix = f"node[{i}]." if max(len(nodes_a), len(nodes_b)) > 1 else "node."
        changes = []
        if na.get("name") != nb.get("name"):
            changes.append(("name", na.get("name"), nb.get("name")))
        ta, tb = (na.get("tier_config") or {}), (nb.get("tier_config") or {})
        if ta.get("config") and tb.get("config"):
            changes += [
                (f"tier_config.{r.path}", r.old, r.new)
                for r in tier_config_diff(ta["config"], tb["config"])
            ]
        elif ta.get("config") != tb.get("config"):
            changes.append(("tier_config", _ref_label(ta), _ref_label(tb)))
        pa, pb = (na.get("launch_profile") or {}), (nb.get("launch_profile") or {})
        changes += [
            (f"launch_profile.{r.path}", r.old, r.new)
            for r in launch_args_diff(pa.get("args") or {}, pb.get("args") or {})
        ]
        ea, eb = (na.get("engine") or {}), (nb.get("engine") or {})
        changes += [(f"engine.{r.path}", r.old, r.new) for r in dict_diff(ea, eb)]
        changes += [
            (f"gpu.{r.path}", r.old, r.new)
            for r in dict_diff(na.get("gpu") or {}, nb.get("gpu") or {})
        ]
        rows += [{"path": prefix + path, "old": old, "new": new} for path, old, new in changes]
    # The salt differs from run to run by design (prefix-cache isolation), not a change.
    skip = {"base_url", "api_key", "salt"}
    wa = {k: v for k, v in (a.workload or {}).items() if k not in skip}
    wb = {k: v for k, v in (b.workload or {}).items() if k not in skip}
    rows += [{"path": f"workload.{r.path}", "old": r.old, "new": r.new} for r in dict_diff(wa, wb)]
    if a.endpoint_id != b.endpoint_id:
        rows.insert(0, {"path": "endpoint", "old": a.endpoint.name, "new": b.endpoint.name})
    return rows


def _ref_label(ref: dict[str, Any]) -> str | None:
    return f"{ref['name']} v{ref['version']}" if ref.get("name") else None


def csv_lines(run: BenchmarkRun) -> Iterator[str]:
    """The run's samples as CSV, streamed row by row."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(SAMPLE_FIELDS)
    yield _drain(buffer)
    for row in (
        RequestSample.objects.filter(run=run)
        .order_by("index")
        .values_list(*SAMPLE_FIELDS)
        .iterator(chunk_size=5000)
    ):
        writer.writerow(row)
        yield _drain(buffer)


def _drain(buffer: io.StringIO) -> str:
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text
