"""Pages under /benchmarks/: list with one-click presets, form, run detail with live
progress and charts, compare, exports."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.bench import charts, results, services
from console.bench.choices import Preset, RunStatus
from console.bench.forms import QuickRunForm, RunForm
from console.bench.models import BenchmarkRun, RequestSample
from console.bench.presets import PRESETS, preset_workload
from console.core.ids import parse_id
from console.core.roles import OPERATOR, VIEWER, has_role, require_role
from console.fleet.choices import EndpointKind
from console.fleet.models import Endpoint

RUNS_PER_PAGE = 25


def summary_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The summary's tiers in display order (online, batch, offline, others, overall)."""
    return [{"tier": tier, **summary[tier]} for tier in sorted(summary, key=results.tier_sort_key)]


@login_required
@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    require_role(request, VIEWER)
    runs = BenchmarkRun.objects.select_related("endpoint", "created_by")
    filters = {k: request.GET.get(k, "") for k in ("status", "endpoint", "preset")}
    if filters["status"] in RunStatus.values:
        runs = runs.filter(status=filters["status"])
    if filters["endpoint"]:
        runs = runs.filter(endpoint_id=parse_id(filters["endpoint"], "endpoint"))
    if filters["preset"] in Preset.values:
        runs = runs.filter(preset=filters["preset"])
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    endpoints = list(Endpoint.objects.select_related("node").order_by("name"))
    # One-click targets: node gateways first (what the demo has), or the filtered endpoint.
    targets = [e for e in endpoints if str(e.pk) == filters["endpoint"]] or sorted(
        endpoints, key=lambda e: (e.kind != EndpointKind.GATEWAY, e.name)
    )
    return render(
        request,
        "bench/run_list.html",
        {
            "page": page,
            "filters": filters,
            "endpoints": endpoints,
            "targets": targets,
            "presets": list(PRESETS.values()),
            "statuses": RunStatus.choices,
            "preset_choices": Preset.choices,
            "query": urlencode({k: v for k, v in filters.items() if v}),
            "can_run": has_role(request.user, OPERATOR),
        },
    )


@login_required
@require_POST
def run_quick(request: HttpRequest) -> HttpResponse:
    require_role(request, OPERATOR)
    form = QuickRunForm(request.POST)
    if not form.is_valid():
        messages.error(request, "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
        return redirect("bench:run-list")
    endpoint: Endpoint = form.cleaned_data["endpoint"]
    model = services.default_model(endpoint)
    workload, profiles = preset_workload(form.cleaned_data["preset"], endpoint.base_url, model)
    try:
        run = services.create_run(
            endpoint=endpoint,
            workload=workload,
            user=request.user,
            request=request,
            model=model,
            preset=form.cleaned_data["preset"],
            tier_profiles=profiles,
            label=f"{PRESETS[form.cleaned_data['preset']].title} on {endpoint.name}",
        )
    except services.RunError as exc:
        messages.error(request, f"Cannot start the run: {exc}")
        return redirect("bench:run-list")
    return redirect("bench:run-detail", pk=run.pk)


@login_required
@require_http_methods(["GET", "POST"])
def run_create(request: HttpRequest) -> HttpResponse:
    require_role(request, OPERATOR)
    if request.method == "POST":
        form = RunForm(request.POST, request.FILES)
        if form.is_valid():
            data = form.cleaned_data
            run = services.create_run(
                endpoint=data["endpoint"],
                workload=data["workload"],
                user=request.user,
                request=request,
                model=data["model"],
                preset=data["preset"],
                label=data.get("label", ""),
                notes=data.get("notes", ""),
            )
            return redirect("bench:run-detail", pk=run.pk)
    else:
        form = RunForm(initial={"endpoint": request.GET.get("endpoint")})
    return render(request, "bench/run_form.html", {"form": form})


def _run(pk: int) -> BenchmarkRun:
    return get_object_or_404(BenchmarkRun.objects.select_related("endpoint", "created_by"), pk=pk)


@login_required
@require_GET
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, VIEWER)
    run = _run(pk)
    context: dict[str, Any] = {
        "run": run,
        "can_run": has_role(request.user, OPERATOR),
        "rows": summary_rows(run.summary or {}),
        "figures": None,
    }
    if run.summary:
        context["figures"] = charts.run_figures(
            run, results.sample_arrays(run), results.telemetry_rows(run)
        )
    others = (
        BenchmarkRun.objects.exclude(pk=run.pk)
        .filter(status=RunStatus.SUCCEEDED)
        .order_by("-created_at")
    )
    context["compare_with"] = others[:50]
    return render(request, "bench/run_detail.html", context)


@login_required
@require_GET
def run_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """The live fragment (data-live-url): progress bar while active, a done marker after."""
    require_role(request, VIEWER)
    return render(
        request,
        "bench/_progress.html",
        {"run": _run(pk), "can_run": has_role(request.user, OPERATOR)},
    )


@login_required
@require_POST
def run_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, OPERATOR)
    run = _run(pk)
    if run.is_active:
        services.request_cancel(run, request.user, request)
        messages.info(
            request, "Cancel requested: the run stops within a second and keeps what completed."
        )
    return redirect("bench:run-detail", pk=pk)


@login_required
@require_GET
def run_export_json(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, VIEWER)
    run = _run(pk)
    samples = [
        s.to_loadgen().to_dict(with_itl_raw=False)
        for s in RequestSample.objects.filter(run=run).order_by("index").iterator(chunk_size=5000)
    ]
    data = {
        "id": run.pk,
        "label": run.label,
        "endpoint": run.endpoint.name,
        "model": run.model,
        "preset": run.preset,
        "status": run.status,
        "status_reason": run.status_reason,
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "workload": run.workload,
        "tier_profiles": run.tier_profiles,
        "config_snapshot": run.config_snapshot,
        "summary": run.summary,
        "timeseries": run.timeseries,
        "validity": run.validity,
        "samples": samples,
    }
    response = JsonResponse(data, json_dumps_params={"indent": 1})
    response["Content-Disposition"] = f'attachment; filename="benchmark-{run.pk}.json"'
    return response


@login_required
@require_GET
def run_export_csv(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, VIEWER)
    run = _run(pk)
    response = StreamingHttpResponse(results.csv_lines(run), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="benchmark-{run.pk}-samples.csv"'
    return response


@login_required
@require_GET
def compare(request: HttpRequest) -> HttpResponse:
    require_role(request, VIEWER)
    a_id, b_id = request.GET.get("a", ""), request.GET.get("b", "")
    finished = (
        BenchmarkRun.objects.exclude(summary={})
        .select_related("endpoint")
        .order_by("-created_at")[:200]
    )
    context: dict[str, Any] = {"choices": finished, "a_id": a_id, "b_id": b_id, "comparison": None}
    if a_id and b_id:
        a_pk, b_pk = parse_id(a_id, "a"), parse_id(b_id, "b")
        a, b = _run(a_pk), _run(b_pk)
        arrays = (
            results.sample_arrays(a),
            results.sample_arrays(b),
        )  # read once: verdicts and charts
        comparison = results.compare_runs(a, b, arrays)
        context.update(
            {
                "a": a,
                "b": b,
                "comparison": comparison,
                "tiers": sorted(
                    comparison["tiers"].items(), key=lambda kv: results.tier_sort_key(kv[0])
                ),
                "figures": charts.compare_figures(
                    comparison, *arrays, results.telemetry_rows(a), results.telemetry_rows(b)
                ),
                "diff_json": [
                    {**row, "old": json.dumps(row["old"]), "new": json.dumps(row["new"])}
                    for row in comparison["config_diff"]
                ],
            }
        )
    return render(request, "bench/compare.html", context)
