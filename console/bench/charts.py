"""Plotly figures of runs and comparisons, built server-side and drawn by the locally served
plotly.min.js. Figures hold at most a few thousand points whatever the run's size: CDFs are
drawn at CDF_POINTS quantiles and time series are per second."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from console.bench.comparison import cdf_points
from console.bench.models import BenchmarkRun
from console.bench.results import Arrays
from console.core.tiers import TIER_COLOURS
from loadgen.stats import OVERALL

SIDE_COLOURS = {"A": "#68717d", "B": "#2357c6"}
LAYOUT = {
    "template": "plotly_white",
    "margin": {"l": 55, "r": 20, "t": 40, "b": 35},
    "legend": {"orientation": "h", "y": -0.12},
}
CDF_PANELS = (("ttft", "TTFT (ms)"), ("tpot", "TPOT (ms)"), ("e2e", "E2E latency (ms)"))


def as_dict(fig: go.Figure) -> dict[str, Any]:
    """Plain JSON data for the template's json_script."""
    return json.loads(fig.to_json())  # type: ignore[no-any-return]


def _ms(values: list[float]) -> list[float]:
    return [v * 1000 for v in values]


def cdf_figure(arrays: Arrays) -> go.Figure:
    fig = make_subplots(
        rows=1, cols=3, subplot_titles=[t for _, t in CDF_PANELS], shared_yaxes=True
    )
    for tier, columns in arrays.items():
        colour = TIER_COLOURS.get(tier)
        for col, (field, _) in enumerate(CDF_PANELS, start=1):
            x, y = cdf_points(columns[field])
            fig.add_trace(
                go.Scatter(
                    x=_ms(x),
                    y=y,
                    mode="lines",
                    name=tier,
                    legendgroup=tier,
                    showlegend=col == 1,
                    line={"color": colour} if colour else {},
                ),
                row=1,
                col=col,
            )
    fig.update_yaxes(title_text="share of requests", row=1, col=1, range=[0, 1])
    fig.update_layout(height=340, **LAYOUT)
    return fig


def timeline_figure(run: BenchmarkRun) -> go.Figure:
    rows = run.timeseries or []
    seconds = [r["second"] for r in rows]
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=("Throughput per second", "TTFT of requests completed each second (ms)"),
        specs=[[{"secondary_y": True}], [{}]],
    )
    fig.add_trace(
        go.Bar(
            x=seconds,
            y=[r["completed"] for r in rows],
            name="requests/s",
            marker={"color": "#9db4e8"},
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=seconds,
            y=[r["output_tokens"] for r in rows],
            name="output tokens/s",
            mode="lines",
            line={"color": "#1a7f37"},
        ),
        row=1,
        col=1,
        secondary_y=True,
    )
    for key, name, colour in (
        ("ttft_p50_s", "TTFT P50", "#2357c6"),
        ("ttft_p99_s", "TTFT P99", "#c62323"),
    ):
        fig.add_trace(
            go.Scatter(
                x=seconds,
                y=[None if r[key] is None else r[key] * 1000 for r in rows],
                name=name,
                mode="lines+markers",
                line={"color": colour},
            ),
            row=2,
            col=1,
        )
    fig.update_xaxes(title_text="seconds into the measured window", row=2, col=1)
    fig.update_yaxes(title_text="requests/s", row=1, col=1, secondary_y=False, rangemode="tozero")
    fig.update_yaxes(
        title_text="output tokens/s", row=1, col=1, secondary_y=True, rangemode="tozero"
    )
    fig.update_yaxes(title_text="ms", row=2, col=1, rangemode="tozero")
    fig.update_layout(height=480, **LAYOUT)
    return fig


def telemetry_figure(series: dict[str, list[dict[str, Any]]], by_time: bool = False) -> go.Figure:
    """GPU utilisation and KV use over the run, one line per (run side or node) key."""
    simulated = any(r.get("gpu_source") == "simulated" for rows in series.values() for r in rows)
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=(
            "GPU utilisation (%)" + (" - simulated" if simulated else ""),
            "KV cache use (%)",
        ),
    )
    for name, rows in series.items():
        x = [r["ts"] for r in rows] if by_time else [r["t"] for r in rows]
        colour = SIDE_COLOURS.get(name.split(" ")[0])
        line = {"color": colour} if colour else {}
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[None if r["gpu_util"] is None else r["gpu_util"] * 100 for r in rows],
                mode="lines",
                name=f"{name} GPU",
                legendgroup=name,
                line=line,
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[
                    None if r["kv_cache_usage"] is None else r["kv_cache_usage"] * 100 for r in rows
                ],
                mode="lines",
                name=f"{name} KV",
                legendgroup=name,
                line={**line, "dash": "dot"},
            ),
            row=2,
            col=1,
        )
    fig.update_yaxes(range=[0, 100])
    if not by_time:
        fig.update_xaxes(title_text="seconds since the run started", row=2, col=1)
    fig.update_layout(height=420, **LAYOUT)
    return fig


def by_node(rows: list[dict[str, Any]], prefix: str = "") -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        grouped[f"{prefix}{r['node']}"].append(r)
    return dict(grouped)


def run_figures(
    run: BenchmarkRun, arrays: Arrays, telemetry: list[dict[str, Any]]
) -> dict[str, Any]:
    figures = {"cdf": as_dict(cdf_figure(arrays)), "timeline": as_dict(timeline_figure(run))}
    if telemetry:
        figures["telemetry"] = as_dict(telemetry_figure(by_node(telemetry), by_time=True))
    return figures


def bars_figure(comparison: dict[str, Any]) -> go.Figure:
    """Grouped bars: TTFT P50, TTFT P99, E2E P99 per tier, A beside B."""
    panels = (
        ("ttft_p50", "TTFT P50 (ms)"),
        ("ttft_p99", "TTFT P99 (ms)"),
        ("e2e_p99", "E2E P99 (ms)"),
    )
    fig = make_subplots(rows=1, cols=3, subplot_titles=[t for _, t in panels])
    tiers = list(comparison["tiers"])
    for col, (metric, _) in enumerate(panels, start=1):
        for side, key in (("A", "before"), ("B", "after")):
            values = []
            for tier in tiers:
                m = next(x for x in comparison["tiers"][tier]["metrics"] if x["metric"] == metric)
                values.append(None if m[key] is None else m[key] * 1000)
            fig.add_trace(
                go.Bar(
                    x=tiers,
                    y=values,
                    name=f"{side} ({comparison['side_' + side.lower()]['label']})",
                    legendgroup=side,
                    showlegend=col == 1,
                    marker={"color": SIDE_COLOURS[side]},
                ),
                row=1,
                col=col,
            )
    fig.update_layout(barmode="group", height=360, **LAYOUT)
    return fig


def overlay_cdf_figure(arrays_a: Arrays, arrays_b: Arrays, ids: tuple[str, str]) -> go.Figure:
    panels = (("ttft", "TTFT (ms), all tiers"), ("e2e", "E2E latency (ms), all tiers"))
    fig = make_subplots(rows=1, cols=2, subplot_titles=[t for _, t in panels], shared_yaxes=True)
    for side, arrays, run_id in (("A", arrays_a, ids[0]), ("B", arrays_b, ids[1])):
        columns = arrays.get(OVERALL)
        if columns is None:
            continue
        for col, (field, _) in enumerate(panels, start=1):
            x, y = cdf_points(columns[field])
            fig.add_trace(
                go.Scatter(
                    x=_ms(x),
                    y=y,
                    mode="lines",
                    name=f"{side} ({run_id})",
                    legendgroup=side,
                    showlegend=col == 1,
                    line={"color": SIDE_COLOURS[side]},
                ),
                row=1,
                col=col,
            )
    fig.update_yaxes(range=[0, 1])
    fig.update_layout(height=340, **LAYOUT)
    return fig


def compare_figures(
    comparison: dict[str, Any],
    arrays_a: Arrays,
    arrays_b: Arrays,
    telemetry_a: list[dict[str, Any]],
    telemetry_b: list[dict[str, Any]],
) -> dict[str, Any]:
    ids = (comparison["side_a"]["label"], comparison["side_b"]["label"])
    figures = {
        "bars": as_dict(bars_figure(comparison)),
        "cdf": as_dict(overlay_cdf_figure(arrays_a, arrays_b, ids)),
    }
    series = {**by_node(telemetry_a, f"A {ids[0]} "), **by_node(telemetry_b, f"B {ids[1]} ")}
    if series:
        figures["telemetry"] = as_dict(telemetry_figure(series))
    return figures
