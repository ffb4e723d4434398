"""The compare page (/benchmarks/compare/): the decision first, with its one click to add
runs until decided (adaptive.py), then every metric's verdict, charts, conditions and the
configuration diff."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from console.bench import adaptive, charts, figures, repeats, results, services, sides
from console.bench.models import BenchmarkRun, RunSeries
from console.bench.sweeps.choices import Objective
from console.bench.views import int_or_raw
from console.core.roles import OPERATOR, VIEWER, has_role, require_role
from console.core.tiers import tier_sort_key


@login_required
@require_POST
def decide(request: HttpRequest) -> HttpResponse:
    """One click on the compare page: runs added to both sides, round after round, until the
    decision is made or the budget is spent (adaptive.py)."""
    require_role(request, OPERATOR)
    a_id, b_id = request.POST.get("a", ""), request.POST.get("b", "")
    objective = figures.objective_of(request.POST.get("objective"))
    back = f"{reverse('bench:compare')}?{urlencode({'a': a_id, 'b': b_id, 'objective': objective})}"
    try:
        found = sides.resolve_all({"a": a_id, "b": b_id})
        series_a, series_b = adaptive.start(
            found["a"],
            found["b"],
            objective=objective,
            budget_runs=int_or_raw(request.POST.get("budget_runs"), adaptive.DEFAULT_BUDGET_RUNS),
            budget_minutes=int_or_raw(
                request.POST.get("budget_minutes"), adaptive.DEFAULT_BUDGET_MINUTES
            ),
            user=request.user,
            request=request,
        )
    except (sides.SideError, services.RunError) as exc:
        messages.error(request, f"Cannot add runs: {exc.field}: {exc.message}")
        return redirect(back)
    messages.info(request, f"Runs queued until decided: {series_a.adaptive_state}.")
    query = urlencode({"a": series_a.ref, "b": series_b.ref, "objective": objective})
    return redirect(f"{reverse('bench:compare')}?{query}")


def _decide_context(a: sides.Side, b: sides.Side, comparison: dict[str, Any]) -> dict[str, Any]:
    """The decision card's extras: whether one click may add runs, and a pair's progress."""
    pair = adaptive.pair_of(a, b)
    return {
        "can_extend": adaptive.extendable(a, b),
        "adaptive_state": pair[0].adaptive_state if pair else "",
        "adaptive_active": bool(pair and pair[0].budget_runs is not None),
        "budget_runs": adaptive.DEFAULT_BUDGET_RUNS,
        "budget_minutes": adaptive.DEFAULT_BUDGET_MINUTES,
        "validity_sides": [(name, comparison["validity"][name]) for name in ("A", "B")],
    }


@login_required
@require_GET
def compare(request: HttpRequest) -> HttpResponse:
    require_role(request, VIEWER)
    a_id, b_id = request.GET.get("a", ""), request.GET.get("b", "")
    objective = figures.objective_of(request.GET.get("objective"))
    finished = (
        BenchmarkRun.objects.exclude(summary={})
        .select_related("endpoint")
        .order_by("-created_at")[:200]
    )
    series = RunSeries.objects.order_by("-created_at")[:50]
    context: dict[str, Any] = {
        "choices": finished,
        "series_choices": series,
        "a_id": a_id,
        "b_id": b_id,
        "comparison": None,
        "can_run": has_role(request.user, OPERATOR),
        "default_repeats": repeats.DEFAULT_REPEATS,
        "objective": objective,
        "objectives": Objective.choices,
    }
    if a_id and b_id:
        try:
            found = sides.resolve_all({"a": a_id, "b": b_id})
            a, b = found["a"], found["b"]
        except sides.SideError as exc:
            messages.error(request, str(exc))
            return render(request, "bench/compare.html", context, status=400)
        # Read once: verdicts and charts.
        arrays = (
            [results.sample_arrays(r) for r in a.runs],
            [results.sample_arrays(r) for r in b.runs],
        )
        comparison = sides.compare_sides(a, b, arrays, objective=objective)
        telemetry_a = [row for r in a.runs[:1] for row in results.telemetry_rows(r)]
        telemetry_b = [row for r in b.runs[:1] for row in results.telemetry_rows(r)]
        context.update(
            {
                "a": a,
                "b": b,
                "comparison": comparison,
                "pair_of_runs": a_id.isdigit() and b_id.isdigit(),
                "tiers": sorted(comparison["tiers"].items(), key=lambda kv: tier_sort_key(kv[0])),
                "figures": charts.compare_figures(
                    comparison,
                    sides.pooled(arrays[0]),
                    sides.pooled(arrays[1]),
                    telemetry_a,
                    telemetry_b,
                ),
                "diff_json": [
                    {**row, "old": json.dumps(row["old"]), "new": json.dumps(row["new"])}
                    for row in comparison["config_diff"]
                ],
                **_decide_context(a, b, comparison),
            }
        )
    return render(request, "bench/compare.html", context)
