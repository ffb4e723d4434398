"""Plotly figures of a node's telemetry, built server-side (plotly python) and drawn in the
page by the locally served plotly.min.js."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import plotly.graph_objects as go
from django.utils import timezone
from plotly.subplots import make_subplots

from console.core.tiers import TIER_COLOURS, tier_sort_key
from console.fleet.models import Node, TelemetrySample

WINDOW = timedelta(hours=1)
MAX_POINTS = 720  # per trace: an hour of 1 s samples is drawn as 5 s buckets


def window_rows(node: Node, now: datetime | None = None) -> list[tuple[Any, ...]]:
    since = (now or timezone.now()) - WINDOW
    return list(
        TelemetrySample.objects.filter(node=node, ts__gte=since)
        .order_by("ts")
        .values_list("ts", "gpu_util", "kv_cache_usage", "tiers", "gpu_source")
    )


def downsample(rows: list[tuple[Any, ...]], max_points: int = MAX_POINTS) -> list[tuple[Any, ...]]:
    """At most `max_points` rows, each standing for a run of consecutive samples: the run's last
    time, its mean utilisation and KV use, and per tier its largest depth and TTFT P99 (a
    spike must survive the drawing)."""
    if len(rows) <= max_points:
        return rows
    size = -(-len(rows) // max_points)
    out = []
    for start in range(0, len(rows), size):
        run = rows[start : start + size]
        tiers: dict[str, dict[str, Any]] = {}
        for row in run:
            for tier, figures in (row[3] or {}).items():
                merged = tiers.setdefault(tier, {})
                for key in ("depth", "ttft_p99_s"):
                    value = figures.get(key)
                    if value is not None and (merged.get(key) is None or value > merged[key]):
                        merged[key] = value
        out.append(
            (run[-1][0], _mean(r[1] for r in run), _mean(r[2] for r in run), tiers, run[-1][4])
        )
    return out


def _mean(values: Any) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def node_figure(rows: list[tuple[Any, ...]], simulated: bool = False) -> go.Figure:
    """Four stacked panels sharing the time axis: GPU util, KV use, queue depth per tier,
    TTFT P99 per tier."""
    fig = make_subplots(
        rows=4,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.06,
        subplot_titles=(
            "GPU utilisation (%)" + (" - simulated" if simulated else ""),
            "KV cache use (%)",
            "Queue depth per tier",
            "TTFT P99 per tier (ms)",
        ),
    )
    times = [r[0] for r in rows]
    fig.add_trace(
        go.Scatter(
            x=times,
            y=[None if r[1] is None else r[1] * 100 for r in rows],
            name="GPU util",
            mode="lines",
            line={"color": "#1a7f37"},
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=times,
            y=[None if r[2] is None else r[2] * 100 for r in rows],
            name="KV use",
            mode="lines",
            line={"color": "#5b3cc4"},
        ),
        row=2,
        col=1,
    )
    tiers = sorted({name for r in rows for name in (r[3] or {})}, key=tier_sort_key)
    for tier in tiers:
        colour = TIER_COLOURS.get(tier)
        line = {"color": colour} if colour else {}
        depth = [(r[3] or {}).get(tier, {}).get("depth") for r in rows]
        ttft = [(r[3] or {}).get(tier, {}).get("ttft_p99_s") for r in rows]
        fig.add_trace(
            go.Scatter(
                x=times, y=depth, name=f"{tier} depth", mode="lines", line=line, legendgroup=tier
            ),
            row=3,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=times,
                y=[None if v is None else v * 1000 for v in ttft],
                name=f"{tier} TTFT P99",
                mode="markers+lines",
                line=line,
                legendgroup=tier,
                connectgaps=False,
            ),
            row=4,
            col=1,
        )
    fig.update_yaxes(range=[0, 100], row=1, col=1)
    fig.update_yaxes(range=[0, 100], row=2, col=1)
    # Depth and TTFT are never negative: an idle node's flat zero line starts the axis at 0
    # (Plotly's autorange would centre it, -1 to 1).
    fig.update_yaxes(rangemode="nonnegative", row=3, col=1)
    fig.update_yaxes(rangemode="nonnegative", row=4, col=1)
    fig.update_layout(
        height=820,
        # The legend sits above the panels, inside the figure's height, so it never spills
        # out of the card however many tiers there are.
        margin={"l": 50, "r": 20, "t": 90, "b": 30},
        template="plotly_white",
        legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
    )
    return fig


def node_figure_json(node: Node, now: datetime | None = None) -> str:
    """The last hour's figure as Plotly JSON, downsampled for drawing."""
    return str(
        node_figure(downsample(window_rows(node, now)), simulated=node.is_simulated).to_json()
    )


def node_figure_dict(node: Node, now: datetime | None = None) -> dict[str, Any]:
    """The figure as plain JSON data, for the template's json_script."""
    figure: dict[str, Any] = json.loads(node_figure_json(node, now))
    return figure
