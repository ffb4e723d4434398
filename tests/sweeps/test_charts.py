"""The sweep page's Pareto charts from plain trial data: points, feasibility told apart, the
front through the feasible trials only."""

from __future__ import annotations

from typing import Any

from console.bench.sweeps.charts import (
    PANELS,
    TrialPoint,
    front_indices,
    pareto_figure,
    pareto_figures,
)


def _metrics(rps: float, ttft: float, per_user: float, per_gpu: float) -> dict[str, Any]:
    return {
        "throughput_rps": rps,
        "ttft_p99_ms": {"online": ttft, "overall": ttft * 2},
        "tokens_per_s_per_user": per_user,
        "tokens_per_s_per_gpu": per_gpu,
    }


POINTS = [
    TrialPoint(0, "base", True, _metrics(10, 200, 50, 400)),
    # Dominated by trial 2 (less throughput, more latency).
    TrialPoint(1, "#1", True, _metrics(9, 300, 40, 300)),
    TrialPoint(2, "#2", True, _metrics(12, 150, 60, 500), best=True),
    # Would dominate everything, but breaks a constraint: not on the front.
    TrialPoint(3, "#3", False, _metrics(30, 50, 90, 900), ["error rate 9% > 1%"]),
    TrialPoint(4, "#4", True, _metrics(20, 400, 30, 800)),
    TrialPoint(5, "#5 failed", False, {}),  # nothing measured: not plotted
]


def _trace(fig: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in fig["data"] if t["name"] == name)


def test_feasible_and_infeasible_trials_are_separate_traces_with_their_own_markers() -> None:
    fig = pareto_figure(POINTS, "latency").to_plotly_json()
    feasible, infeasible = _trace(fig, "feasible"), _trace(fig, "infeasible")
    assert list(feasible["customdata"]) == [0, 1, 2, 4]
    assert list(infeasible["customdata"]) == [3]
    assert feasible["marker"]["symbol"] != infeasible["marker"]["symbol"]
    assert feasible["marker"]["color"] != infeasible["marker"]["color"]
    # The best trial is drawn larger than the others.
    sizes = list(feasible["marker"]["size"])
    assert sizes[2] > sizes[0] == sizes[1] == sizes[3]
    assert "infeasible<br>error rate 9% > 1%" in infeasible["text"][0]


def test_the_latency_front_maximises_throughput_and_minimises_online_ttft() -> None:
    _title, x, y = PANELS["latency"]
    rows = [(p, x.value(p.metrics), y.value(p.metrics)) for p in POINTS if p.metrics]
    # 2 beats 0 and 1; 4 has more throughput than 2: both on the front; 3 is infeasible.
    assert front_indices(rows, x, y) == [2, 4]  # type: ignore[arg-type]
    front = _trace(pareto_figure(POINTS, "latency").to_plotly_json(), "Pareto front (feasible)")
    assert list(front["x"]) == [12, 20] and list(front["y"]) == [150, 400]


def test_the_tokens_front_maximises_both_axes_as_vllm_plots_it() -> None:
    fig = pareto_figure(POINTS, "tokens").to_plotly_json()
    assert fig["layout"]["xaxis"]["title"]["text"] == "Tokens/s per user"
    assert fig["layout"]["yaxis"]["title"]["text"] == "Tokens/s per GPU"
    front = _trace(fig, "Pareto front (feasible)")
    assert list(front["x"]) == [30, 60] and list(front["y"]) == [800, 500]


def test_a_workload_without_an_online_tier_plots_the_overall_ttft() -> None:
    points = [TrialPoint(0, "base", True, {"throughput_rps": 5, "ttft_p99_ms": {"overall": 80}})]
    fig = pareto_figure(points, "latency").to_plotly_json()
    assert list(_trace(fig, "feasible")["y"]) == [80]


def test_no_figures_until_a_trial_has_measurements() -> None:
    assert pareto_figures([TrialPoint(0, "base", True, {})]) == {}
    figures = pareto_figures(POINTS)
    assert set(figures) == {"pareto-latency", "pareto-tokens"}
    assert all(isinstance(f["data"], list) for f in figures.values())
