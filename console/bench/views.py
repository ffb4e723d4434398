"""Pages under /benchmarks/: list with one-click presets, form, run detail with live
progress and charts, repeats, exports (compare: compare_views.py)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.bench import charts, repeats, results, services
from console.bench.choices import COMPARABLE, Preset, RunStatus
from console.bench.forms import QuickRunForm, RunForm
from console.bench.models import BenchmarkRun, RequestSample, RunSeries
from console.bench.presets import PRESETS, preset_workload
from console.core.ids import parse_id
from console.core.roles import OPERATOR, VIEWER, has_role, require_role
from console.core.tiers import tier_sort_key
from console.fleet.choices import EndpointKind
from console.fleet.models import Endpoint

RUNS_PER_PAGE = 25


def summary_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The summary's tiers in display order (online, batch, offline, others, overall)."""
    return [{"tier": tier, **summary[tier]} for tier in sorted(summary, key=tier_sort_key)]


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
        messages.error(
            request, "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in form.errors.items())
        )
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
    context = _info_context(request, run)
    context.update({"rows": summary_rows(run.summary or {}), "figures": None})
    if run.summary:
        context["figures"] = charts.run_figures(
            run, results.sample_arrays(run), results.telemetry_rows(run)
        )
    others = (
        BenchmarkRun.objects.exclude(pk=run.pk)
        .filter(status__in=COMPARABLE)
        .order_by("-created_at")
    )
    context["compare_with"] = others[:50]
    return render(request, "bench/run_detail.html", context)


def _info_context(request: HttpRequest, run: BenchmarkRun) -> dict[str, Any]:
    """What the run's facts and configuration card shows (the page and its live fragment)."""
    context: dict[str, Any] = {
        "run": run,
        "can_run": has_role(request.user, OPERATOR),
        "default_repeats": repeats.DEFAULT_REPEATS,
    }
    if run.series is not None:
        context["series_runs"] = list(run.series.runs.order_by("pk").values_list("pk", "status"))
        context["series_active"] = any(
            st in (RunStatus.PENDING, RunStatus.RUNNING) for _, st in context["series_runs"]
        )
    return context


@login_required
@require_GET
def run_info(request: HttpRequest, pk: int) -> HttpResponse:
    """The live fragment of the run's facts: started/finished and the configuration snapshot
    fill in while the run goes on."""
    require_role(request, VIEWER)
    return render(request, "bench/_run_info.html", _info_context(request, _run(pk)))


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
        "error_breakdown": run.error_breakdown,
        "conditions": run.conditions,
        "series": run.series_id,
        "samples": samples,
    }
    response = JsonResponse(data, json_dumps_params={"indent": 1})
    response["Content-Disposition"] = f'attachment; filename="benchmark-{run.pk}.json"'
    return response


@login_required
@require_GET
def run_export_csv(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    require_role(request, VIEWER)
    run = _run(pk)
    response = StreamingHttpResponse(results.csv_lines(run), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="benchmark-{run.pk}-samples.csv"'
    return response


@login_required
@require_POST
def run_repeat(request: HttpRequest, pk: int) -> HttpResponse:
    """One click on the run page: N more runs like this one, then the series compared with
    this run's series (or the run itself)."""
    require_role(request, OPERATOR)
    run = _run(pk)
    try:
        count = repeats.check_repeats(
            int_or_raw(request.POST.get("repeats"), repeats.DEFAULT_REPEATS)
        )
    except services.RunError as exc:
        messages.error(request, f"Cannot repeat: {exc}")
        return redirect("bench:run-detail", pk=pk)
    series = repeats.create_series(run, count, request.user, request)
    messages.info(request, f"{count} repeats of #{run.pk} queued as series {series.pk}.")
    return redirect("bench:run-detail", pk=series.runs.order_by("pk").first().pk)  # type: ignore[union-attr]


@login_required
@require_POST
def series_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, OPERATOR)
    series = get_object_or_404(RunSeries, pk=pk)
    repeats.request_cancel_series(series, request.user, request)
    messages.info(request, f"Series {series.pk} cancelled: runs not yet started will not run.")
    run = series.runs.order_by("pk").first()
    return redirect("bench:run-detail", pk=run.pk) if run else redirect("bench:run-list")


@login_required
@require_POST
def repeat_pair(request: HttpRequest) -> HttpResponse:
    """One click on the compare page: both runs repeated N times, interleaved A B A B."""
    require_role(request, OPERATOR)
    a_id, b_id = request.POST.get("a", ""), request.POST.get("b", "")
    back = f"{reverse('bench:compare')}?{urlencode({'a': a_id, 'b': b_id})}"
    if not (a_id.isdigit() and b_id.isdigit()):
        messages.error(request, "Repeat needs two runs (a and b).")
        return redirect(back)
    a, b = _run(int(a_id)), _run(int(b_id))
    try:
        count = repeats.check_repeats(
            int_or_raw(request.POST.get("repeats"), repeats.DEFAULT_REPEATS)
        )
        series_a, series_b = repeats.create_pair(a, b, count, request.user, request)
    except services.RunError as exc:
        messages.error(request, f"Cannot repeat: {exc.message}")
        return redirect(back)
    messages.info(request, f"{count} interleaved runs per side queued.")
    return redirect(f"{reverse('bench:compare')}?a={series_a.ref}&b={series_b.ref}")


def int_or_raw(raw: str | None, default: int) -> Any:
    """A form's integer, its default when empty, or the raw text for the check to refuse."""
    if raw is None or raw == "":
        return default
    return int(raw) if raw.strip().isdigit() else raw
