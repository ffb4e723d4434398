"""Rollout pages: the list, the new-rollout form, the detail page with its live fragment
(per-node progress and timeline, refreshed by live.js), and the buttons (abort, resume a rollout
the SLO guard paused, roll back this rollout, roll back a version to the previous one)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.core.ids import optional_id
from console.core.roles import OPERATOR, VIEWER, has_role, require_role
from console.tuning.changes import applied_changes
from console.tuning.models import LaunchProfileVersion, TierConfigVersion
from console.tuning.rollouts import services
from console.tuning.rollouts.choices import NodeState
from console.tuning.rollouts.forms import RolloutForm
from console.tuning.rollouts.models import Rollout
from console.tuning.rollouts.resume import resume_rollout

PER_PAGE = 30


def _diffs(rollout: Rollout) -> list[dict[str, Any]]:
    """What the rollout changes, one table per distinct move of its nodes (from -> to), so
    every node's change is listed (console/tuning/changes.py)."""
    return applied_changes(rollout)


def _live_context(request: HttpRequest, rollout: Rollout) -> dict[str, Any]:
    parts = list(
        rollout.nodes.select_related(
            "node",
            "node__applied_tier_config",
            "node__applied_launch_profile",
            "target_tier_config",
            "target_launch_profile",
            "prev_tier_config",
            "prev_launch_profile",
        )
    )
    done = sum(1 for p in parts if p.state == NodeState.HEALTHY)
    return {
        "rollout": rollout,
        "parts": parts,
        "done": done,
        "total": len(parts),
        "percent": round(100 * done / len(parts)) if parts else 0,
        "events": list(rollout.events.select_related("node").order_by("ts", "id")),
        "can_operate": has_role(request.user, OPERATOR),
        "now": timezone.now(),
        "can_rollback": rollout.can_roll_back,
    }


@login_required
@require_GET
def rollout_list(request: HttpRequest) -> HttpResponse:
    require_role(request, VIEWER)
    qs = Rollout.objects.with_progress()
    page = Paginator(qs, PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "tuning/rollout_list.html",
        {"page": page, "can_create": has_role(request.user, OPERATOR)},
    )


@login_required
@require_http_methods(["GET", "POST"])
def rollout_create(request: HttpRequest) -> HttpResponse:
    require_role(request, OPERATOR)
    initial = {
        field: optional_id(request.GET.get(key), key)
        for key, field in (("tierconfig", "tier_config"), ("launchprofile", "launch_profile"))
        if request.GET.get(key)
    }
    form = RolloutForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = dict(form.cleaned_data)
        guard = {k: data.pop(k) for k in list(data) if k.startswith("guard_")}
        try:
            rollout = services.create_rollout(
                tier_config=data["tier_config"],
                launch_profile=data["launch_profile"],
                selection=data["node_selection"],
                nodes=list(data["nodes"]),
                label=data["label"],
                stale_targets=data["stale_targets"],
                canary_count=data["canary_count"],
                wave_size=data["wave_size"],
                convergence_timeout_s=data["convergence_timeout_s"],
                canary_soak_s=data["canary_soak_s"],
                message=data["message"],
                user=request.user,
                request=request,
                **guard,
            )
        except services.RolloutError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            messages.success(request, f"{rollout} started.")
            return redirect("tuning:rollout-detail", pk=rollout.pk)
    return render(request, "tuning/rollout_form.html", {"form": form})


@login_required
@require_GET
def rollout_detail(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, VIEWER)
    rollout = get_object_or_404(
        Rollout.objects.select_related(
            "tier_config", "launch_profile", "created_by", "rollback_of"
        ),
        pk=pk,
    )
    context = _live_context(request, rollout)
    context.update(diffs=_diffs(rollout), rollbacks=list(rollout.rollbacks.order_by("-created_at")))
    return render(request, "tuning/rollout_detail.html", context)


@login_required
@require_GET
def rollout_live(request: HttpRequest, pk: int) -> HttpResponse:
    """The fragment live.js swaps in every second: state, nodes, timeline."""
    require_role(request, VIEWER)
    rollout = get_object_or_404(
        Rollout.objects.select_related("tier_config", "launch_profile"), pk=pk
    )
    return render(request, "tuning/_rollout_live.html", _live_context(request, rollout))


@login_required
@require_POST
def rollout_abort(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, OPERATOR)
    rollout = get_object_or_404(Rollout, pk=pk)
    try:
        services.abort_rollout(rollout, request.user, request)
    except services.RolloutError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Abort requested: {rollout} sets back what it changed.")
    return redirect("tuning:rollout-detail", pk=pk)


@login_required
@require_POST
def rollout_resume(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, OPERATOR)
    rollout = get_object_or_404(Rollout, pk=pk)
    try:
        resume_rollout(rollout, request.user, request)
    except services.RolloutError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{rollout} resumed: the paused wave goes on unguarded.")
    return redirect("tuning:rollout-detail", pk=pk)


@login_required
@require_POST
def rollout_rollback(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, OPERATOR)
    rollout = get_object_or_404(Rollout, pk=pk)
    try:
        created = services.rollback_rollout(rollout, request.user, request)
    except services.RolloutError as exc:
        messages.error(request, exc.message)
        return redirect("tuning:rollout-detail", pk=pk)
    messages.success(request, f"{created} started: rolling back {rollout}.")
    return redirect("tuning:rollout-detail", pk=created.pk)


@login_required
@require_POST
def version_rollback(request: HttpRequest, kind: str, pk: int) -> HttpResponse:
    """ "Roll back to the previous version" on a tier config or launch profile page."""
    require_role(request, OPERATOR)
    version: TierConfigVersion | LaunchProfileVersion
    if kind == "tierconfig":
        version = get_object_or_404(TierConfigVersion, pk=pk)
    elif kind == "launchprofile":
        version = get_object_or_404(LaunchProfileVersion, pk=pk)
    else:
        raise Http404("no such kind")
    try:
        created = services.rollback_version(version, request.user, request)
    except services.RolloutError as exc:
        messages.error(request, exc.message)
        return redirect(f"tuning:{kind}-detail", pk=pk)
    messages.success(request, f"{created} started: {created.message}.")
    return redirect("tuning:rollout-detail", pk=created.pk)
