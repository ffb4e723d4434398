"""Plotly figures of a node's telemetry, built server-side (plotly python) and drawn in the
page by the locally served plotly.min.js."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import plotly.graph_objects as go
from django.utils import timezone
from plotly.subplots import make_subplots

from console.fleet.models import Node, TelemetrySample

WINDOW = timedelta(hours=1)
TIER_COLOURS = {"online": "#2357c6", "batch": "#b26b00", "offline": "#68717d"}


def window_rows(node: Node, now: datetime | None = None) -> list[tuple[Any, ...]]:
    since = (now or timezone.now()) - WINDOW
    return list(
        TelemetrySample.objects.filter(node=node, ts__gte=since)
        .order_by("ts")
        .values_list("ts", "gpu_util", "kv_cache_usage", "tiers", "gpu_source")
    )


def node_figure(rows: list[tuple[Any, ...]], simulated: bool = False) -> go.Figure:
    """Four stacked panels sharing the time axis: GPU util, KV use, queue depth per tier,
    TTFT P99 per tier."""
    fig = make_subplots(
        rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.06,
        subplot_titles=("GPU utilisation (%)" + (" - simulated" if simulated else ""), "KV cache use (%)",
                        "Queue depth per tier", "TTFT P99 per tier (ms)"),
    )
    times = [r[0] for r in rows]
    fig.add_trace(go.Scatter(x=times, y=[None if r[1] is None else r[1] * 100 for r in rows],
                             name="GPU util", mode="lines", line={"color": "#1a7f37"}), row=1, col=1)
    fig.add_trace(go.Scatter(x=times, y=[None if r[2] is None else r[2] * 100 for r in rows],
                             name="KV use", mode="lines", line={"color": "#5b3cc4"}), row=2, col=1)
    tiers = sorted({name for r in rows for name in (r[3] or {})}, key=lambda t: (t not in TIER_COLOURS, t))
    for tier in tiers:
        colour = TIER_COLOURS.get(tier)
        line = {"color": colour} if colour else {}
        depth = [(r[3] or {}).get(tier, {}).get("depth") for r in rows]
        ttft = [(r[3] or {}).get(tier, {}).get("ttft_p99_s") for r in rows]
        fig.add_trace(go.Scatter(x=times, y=depth, name=f"{tier} depth", mode="lines", line=line,
                                 legendgroup=tier), row=3, col=1)
        fig.add_trace(go.Scatter(x=times, y=[None if v is None else v * 1000 for v in ttft],
                                 name=f"{tier} TTFT P99", mode="markers+lines", line=line,
                                 legendgroup=tier, connectgaps=False), row=4, col=1)
    fig.update_yaxes(range=[0, 100], row=1, col=1)
    fig.update_yaxes(range=[0, 100], row=2, col=1)
    fig.update_layout(height=820, margin={"l": 50, "r": 20, "t": 40, "b": 30}, template="plotly_white",
                      legend={"orientation": "h", "y": -0.05})
    return fig


def node_figure_dict(node: Node, now: datetime | None = None) -> dict[str, Any]:
    """The figure as plain JSON data, for the template's json_script."""
    figure: dict[str, Any] = json.loads(node_figure(window_rows(node, now), simulated=node.is_simulated).to_json())
    return figure
