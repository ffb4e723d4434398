"""Sweep pages under /benchmarks/sweeps/: the list, the new-sweep form, the detail page with
its live fragment (progress, ETA, trials; refreshed by live.js), the Pareto charts, the best
trial's verdict against the base, and the cancel and adopt buttons (operators, confirmed)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.bench import sides
from console.bench.models import BenchmarkRun
from console.bench.sweeps import charts, services
from console.bench.sweeps.choices import SweepKind, SweepStatus
from console.bench.sweeps.forms import (
    SWEEPABLE_ARGS,
    SweepForm,
    current_versions,
    tier_config_paths,
)
from console.bench.sweeps.models import Sweep, SweepTrial
from console.bench.sweeps.services import check_adoptable
from console.core.ids import id_or_none
from console.core.roles import OPERATOR, VIEWER, has_role, require_role
from console.core.tiers import tier_sort_key
from console.fleet.models import Node

PER_PAGE = 25


def duration_text(seconds: float | None) -> str:
    """ "about 4 min 10 s"; an em dash when unknown."""
    if seconds is None:
        return "—"
    total = max(0, round(seconds))
    if total < 60:
        return f"about {total} s"
    minutes, rest = divmod(total, 60)
    if minutes < 60:
        return f"about {minutes} min {rest} s"
    return f"about {minutes // 60} h {minutes % 60} min"


def short_values(values: dict[str, Any]) -> str:
    """ "online.max_waiting_time_ms=5": a tier config path's last two parts, for the table
    (the full path is in the cell's title)."""
    return ", ".join(f"{'.'.join(p.split('.')[-2:])}={v}" for p, v in values.items())


def variables_text(variables: list[dict[str, Any]]) -> str:
    return "; ".join(
        f"{v.get('path')} ∈ {{{', '.join(str(x) for x in v.get('values', []))}}}" for v in variables
    )


@login_required
@require_GET
def sweep_list(request: HttpRequest) -> HttpResponse:
    require_role(request, VIEWER)
    sweeps = Sweep.objects.select_related(
        "node", "best_trial", "created_by", "base_tier_config", "base_launch_profile"
    )
    status = request.GET.get("status", "")
    if status in SweepStatus.values:
        sweeps = sweeps.filter(status=status)
    page = Paginator(sweeps, PER_PAGE).get_page(request.GET.get("page"))
    for sweep in page:
        sweep.variables_text = variables_text(sweep.variables)  # type: ignore[attr-defined]
    return render(
        request,
        "bench/sweeps/sweep_list.html",
        {
            "page": page,
            "status": status,
            "statuses": SweepStatus.choices,
            "query": f"status={status}" if status in SweepStatus.values else "",
            "can_create": has_role(request.user, OPERATOR),
        },
    )


def _initial(request: HttpRequest) -> dict[str, Any]:
    """?node=<id>&kind=...: the node prefilled (and the kind it has a version of)."""
    initial: dict[str, Any] = {}
    node_id = id_or_none(request.GET.get("node"))
    node = Node.objects.filter(pk=node_id).first() if node_id is not None else None
    if request.GET.get("kind") in SweepKind.values:
        initial["kind"] = request.GET["kind"]
    if node is not None:
        initial["node"] = node
        tier, profile = current_versions(node)
        if "kind" not in initial and tier is None and profile is not None:
            initial["kind"] = SweepKind.LAUNCH_PROFILE
    return initial


def _path_lists(form: SweepForm) -> dict[str, list[str]]:
    """What the variable fields suggest: per node, the numeric fields of its base tier
    config; for launch profiles, the arguments a sweep may vary."""
    lists = {"lp": list(SWEEPABLE_ARGS)}
    for node in form.fields["node"].queryset:  # type: ignore[attr-defined]
        tier = node.desired_tier_config
        if tier is not None:
            lists[f"tc-{node.pk}"] = tier_config_paths(tier.config)
    return lists


@login_required
@require_http_methods(["GET", "POST"])
def sweep_create(request: HttpRequest) -> HttpResponse:
    require_role(request, OPERATOR)
    form = SweepForm(request.POST or None, initial=_initial(request))
    if request.method == "POST" and form.is_valid():
        document = form.document()
        if document is not None:
            try:
                sweep = services.create_sweep(document, request.user, request)
            except services.SweepError as exc:
                form.add_service_error(exc.field, exc.message)
            else:
                messages.success(request, f"{sweep} queued: {sweep.trials_planned} trials at most.")
                return redirect("bench:sweep-detail", pk=sweep.pk)
    node = form["node"].value()
    kind = form["kind"].value()
    return render(
        request,
        "bench/sweeps/sweep_form.html",
        {
            "form": form,
            "path_lists": _path_lists(form),
            "path_list": "lp"
            if kind == SweepKind.LAUNCH_PROFILE
            else f"tc-{getattr(node, 'pk', node)}",
        },
        status=400 if request.method == "POST" else 200,
    )


def _sweep(pk: int) -> Sweep:
    return get_object_or_404(
        Sweep.objects.select_related(
            "node",
            "endpoint",
            "created_by",
            "base_tier_config",
            "base_launch_profile",
            "best_trial",
            "adopted_trial",
            "adopted_rollout",
        ),
        pk=pk,
    )


def _trial_rows(sweep: Sweep, trials: list[SweepTrial]) -> dict[str, Any]:
    """The trials' table: each with its runs, and the tiers any trial measured."""
    runs: dict[int, list[tuple[int, str]]] = {}
    series_ids = [t.series_id for t in trials if t.series_id]
    for series_id, pk, status in (
        BenchmarkRun.objects.filter(series_id__in=series_ids)
        .order_by("pk")
        .values_list("series_id", "pk", "status")
    ):
        runs.setdefault(series_id, []).append((pk, status))
    tiers = sorted(
        {tier for t in trials for tier in (t.metrics or {}).get("ttft_p99_ms", {})},
        key=tier_sort_key,
    )
    base = next((t for t in trials if t.is_base), None)
    rows = []
    for trial in trials:
        ttft = (trial.metrics or {}).get("ttft_p99_ms", {})
        rows.append(
            {
                "trial": trial,
                "runs": runs.get(trial.series_id or 0, []),
                "ttft": [ttft.get(tier) for tier in tiers],
                "short": short_values(trial.values or {}),
                "best": trial.pk == sweep.best_trial_id and not trial.is_base,
                "adoptable": adoptable(sweep, trial),
                "decision": trial.decision or {},
                "undecided": services.undecided(trial) if not trial.is_base else "",
                "compare_base": (
                    f"a=s{base.series_id}&b=s{trial.series_id}"
                    if base is not None and base.series_id and trial.series_id and trial != base
                    else ""
                ),
            }
        )
    no_winner = sweep.is_finished and (
        sweep.best_trial_id is None or sweep.best_trial_id == (base.pk if base else None)
    )
    return {"rows": rows, "tiers": tiers, "base": base, "no_winner": no_winner}


def adoptable(sweep: Sweep, trial: SweepTrial) -> bool:
    """Whether the trial gets an adopt button: services.adopt_trial would take it."""
    try:
        check_adoptable(sweep, trial)
    except services.SweepError:
        return False
    return True


def _live_context(request: HttpRequest, sweep: Sweep) -> dict[str, Any]:
    trials = list(sweep.trials.select_related("tier_config", "launch_profile").order_by("index"))
    planned = max(sweep.trials_planned, len(trials), 1)
    return {
        "sweep": sweep,
        "percent": round(100 * sweep.trials_done / planned),
        "planned": planned,
        "eta": duration_text(sweep.eta_s),
        "can_operate": has_role(request.user, OPERATOR),
        "variables": variables_text(sweep.variables),
        **_trial_rows(sweep, trials),
    }


def _points(rows: list[dict[str, Any]]) -> list[charts.TrialPoint]:
    return [
        charts.TrialPoint(
            index=r["trial"].index,
            label=f"#{r['trial'].index} {r['trial'].values_label}",
            feasible=bool(r["trial"].feasible),
            metrics=r["trial"].metrics or {},
            violations=tuple(r["trial"].violations or ()),
            best=r["best"],
        )
        for r in rows
    ]


def best_verdict(base: SweepTrial | None, best: SweepTrial | None) -> dict[str, Any] | None:
    """The best trial against the base, by the compare page's machinery: the decision by the
    sweep's objective and TTFT caps, then every metric's verdict."""
    if base is None or best is None or best.pk == base.pk:
        return None
    if not (base.series_id and best.series_id):
        return None
    refs = {"a": f"s{base.series_id}", "b": f"s{best.series_id}"}
    found = sides.resolve_all(refs)
    if not (found["a"].runs and found["b"].runs):
        return None
    caps = (best.sweep.constraints or {}).get("max_ttft_p99_ms") or {}
    comparison = sides.compare_sides(
        found["a"],
        found["b"],
        objective=best.sweep.objective,
        slos={tier: float(ms) / 1000 for tier, ms in caps.items()},
    )
    return {
        "comparison": comparison,
        "tiers": sorted(comparison["tiers"].items(), key=lambda kv: tier_sort_key(kv[0])),
        "query": f"a={refs['a']}&b={refs['b']}",
    }


@login_required
@require_GET
def sweep_detail(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, VIEWER)
    sweep = _sweep(pk)
    context = _live_context(request, sweep)
    context["figures"] = charts.pareto_figures(_points(context["rows"]))
    context["verdict"] = best_verdict(context["base"], sweep.best_trial)
    return render(request, "bench/sweeps/sweep_detail.html", context)


@login_required
@require_GET
def sweep_live(request: HttpRequest, pk: int) -> HttpResponse:
    """The fragment live.js swaps in: state, progress, ETA and the trials' table."""
    require_role(request, VIEWER)
    return render(request, "bench/sweeps/_sweep_live.html", _live_context(request, _sweep(pk)))


@login_required
@require_POST
def sweep_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, OPERATOR)
    sweep = _sweep(pk)
    try:
        services.cancel_sweep(sweep, request.user, request)
    except services.SweepError as exc:
        messages.error(request, exc.message)
    else:
        messages.info(
            request, f"Cancel requested: {sweep} stops and puts the node back on its base."
        )
    return redirect("bench:sweep-detail", pk=pk)


@login_required
@require_POST
def sweep_adopt(request: HttpRequest, pk: int) -> HttpResponse:
    """Adopt a trial: a new version of the base's name, then a guarded rollout of it."""
    require_role(request, OPERATOR)
    sweep = _sweep(pk)
    trial_id = id_or_none(request.POST.get("trial"))
    trial = sweep.trials.filter(pk=trial_id).first() if trial_id is not None else None
    if trial is None:
        messages.error(request, "trial: choose a trial of this sweep to adopt.")
        return redirect("bench:sweep-detail", pk=pk)
    try:
        rollout = services.adopt_trial(
            sweep,
            trial,
            request.user,
            request,
            # The page's confirmation said so when the trial is undecided (_sweep_live.html).
            confirm_undecided=request.POST.get("confirm_undecided") == "1",
        )
    except services.SweepError as exc:
        messages.error(request, f"{exc.field}: {exc.message}" if exc.field else exc.message)
        return redirect("bench:sweep-detail", pk=pk)
    messages.success(request, f"{rollout} started: rolling out trial {trial.index} of {sweep}.")
    return redirect("tuning:rollout-detail", pk=rollout.pk)
