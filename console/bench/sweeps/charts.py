"""The sweep page's Pareto charts, built from plain trial data (no Django, no database).

Two panels, one figure each:
- "latency": online TTFT P99 (lower is better) against request throughput (higher is better);
- "tokens": tokens/s per GPU against tokens/s per user, both higher is better, as vLLM's
  `bench sweep` plots them.

Feasible trials and infeasible ones are separate traces (filled circles against grey crosses),
so the legend tells them apart, and every point is labelled with its trial and its two values;
the Pareto front is drawn through the feasible trials only (the ones an operator may adopt),
one definition of the front: scoring.pareto_front.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go

from console.bench.charts import LAYOUT, as_dict
from console.bench.sweeps.scoring import pareto_front
from loadgen.stats import OVERALL

FEASIBLE_STYLE = {"color": "#2357c6", "symbol": "circle", "size": 10}
INFEASIBLE_STYLE = {"color": "#9aa1ab", "symbol": "x", "size": 10}
BEST_SIZE = 16
FRONT_COLOUR = "#1a7f37"
LATENCY_TIER = "online"


@dataclass(frozen=True)
class TrialPoint:
    """What the charts need of a trial: its metrics as scoring.trial_metrics gives them."""

    index: int
    label: str  # "#2 max_num_seqs=16"
    feasible: bool
    metrics: Mapping[str, Any]
    violations: Sequence[str] = field(default_factory=tuple)
    best: bool = False


@dataclass(frozen=True)
class Axis:
    """One figure of a trial's metrics; a per-tier one (tier set) falls back to all tiers
    together when the workload has no such tier."""

    title: str
    key: str
    minimize: bool
    tier: str | None = None
    unit: str = ""  # in a point's label: "82.9 ms"

    def value(self, metrics: Mapping[str, Any]) -> float | None:
        raw = metrics.get(self.key)
        if self.tier is not None:
            per_tier = raw if isinstance(raw, Mapping) else {}
            raw = per_tier.get(self.tier, per_tier.get(OVERALL))
        return float(raw) if isinstance(raw, int | float) else None


PANELS: dict[str, tuple[str, Axis, Axis]] = {
    "latency": (
        "Online TTFT P99 against request throughput",
        Axis("Request throughput (req/s)", "throughput_rps", minimize=False, unit="req/s"),
        Axis("Online TTFT P99 (ms)", "ttft_p99_ms", minimize=True, tier=LATENCY_TIER, unit="ms"),
    ),
    "tokens": (
        "Tokens/s per GPU against tokens/s per user",
        Axis("Tokens/s per user", "tokens_per_s_per_user", minimize=False, unit="tok/s/user"),
        Axis("Tokens/s per GPU", "tokens_per_s_per_gpu", minimize=False, unit="tok/s/GPU"),
    ),
}


def _hover(point: TrialPoint) -> str:
    lines = [point.label, "feasible" if point.feasible else "infeasible"]
    lines += list(point.violations)
    return "<br>".join(lines)


def _short(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def point_label(point: TrialPoint, vx: float, vy: float, x: Axis, y: Axis) -> str:
    """What is written beside a marker: "#2 14 req/s, 82.9 ms" ("base" for trial 0)."""
    name = "base" if point.index == 0 else f"#{point.index}"
    return f"{name} {_short(vx)} {x.unit}, {_short(vy)} {y.unit}".replace("  ", " ")


def plotted(
    points: Sequence[TrialPoint], x: Axis, y: Axis
) -> list[tuple[TrialPoint, float, float]]:
    """The trials that have both figures (a pending or failed trial has none)."""
    out = []
    for point in points:
        vx, vy = x.value(point.metrics), y.value(point.metrics)
        if vx is not None and vy is not None:
            out.append((point, vx, vy))
    return out


def front_indices(
    plotted_points: Sequence[tuple[TrialPoint, float, float]], x: Axis, y: Axis
) -> list[int]:
    """Trial indices on the Pareto front of the feasible trials, in x order."""
    feasible = [(p, vx, vy) for p, vx, vy in plotted_points if p.feasible]
    on_front = pareto_front([(vx, vy) for _, vx, vy in feasible], (x.minimize, y.minimize))
    chosen = sorted((feasible[i] for i in on_front), key=lambda t: (t[1], t[2]))
    return [p.index for p, _, _ in chosen]


def pareto_figure(points: Sequence[TrialPoint], panel: str) -> go.Figure:
    title, x, y = PANELS[panel]
    rows = plotted(points, x, y)
    fig = go.Figure()
    for feasible, name, style in (
        (True, "feasible", FEASIBLE_STYLE),
        (False, "infeasible", INFEASIBLE_STYLE),
    ):
        group = [r for r in rows if r[0].feasible is feasible]
        sizes = [BEST_SIZE if p.best else style["size"] for p, _, _ in group]
        fig.add_trace(
            go.Scatter(
                x=[vx for _, vx, _ in group],
                y=[vy for _, _, vy in group],
                mode="markers",
                name=name,
                text=[_hover(p) for p, _, _ in group],
                customdata=[p.index for p, _, _ in group],
                hovertemplate="%{text}<br>x %{x:.3g}, y %{y:.3g}<extra></extra>",
                marker={"color": style["color"], "symbol": style["symbol"], "size": sizes},
            )
        )
    front = set(front_indices(rows, x, y))
    line = sorted(((vx, vy) for p, vx, vy in rows if p.index in front))
    fig.add_trace(
        go.Scatter(
            x=[vx for vx, _ in line],
            y=[vy for _, vy in line],
            mode="lines",
            name="Pareto front (feasible)",
            line={"color": FRONT_COLOUR, "dash": "dash"},
            hoverinfo="skip",
        )
    )
    # Every point labelled with its values, so a screenshot or a print says what each one is
    # without hovering.
    for point, vx, vy in rows:
        fig.add_annotation(
            x=vx,
            y=vy,
            text=point_label(point, vx, vy, x, y),
            showarrow=False,
            yshift=14,
            font={"size": 10, "color": "#333" if point.feasible else "#9aa1ab"},
        )
    fig.update_xaxes(title_text=x.title, rangemode="tozero")
    fig.update_yaxes(title_text=y.title, rangemode="tozero")
    fig.update_layout(title={"text": title, "font": {"size": 14}}, height=380, **LAYOUT)
    return fig


def pareto_figures(points: Sequence[TrialPoint]) -> dict[str, Any]:
    """Both panels as plain JSON for the template's json_script; {} while no trial has
    figures to plot."""
    if not any(plotted(points, PANELS["latency"][1], PANELS["latency"][2])):
        return {}
    return {f"pareto-{name}": as_dict(pareto_figure(points, name)) for name in PANELS}
