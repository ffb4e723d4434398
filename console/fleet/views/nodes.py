"""Node pages: the node list (live), node detail (telemetry chart), create, rotate, delete,
and the operator's desired-state actions (unset a desired version, acknowledge an apply
error)."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.core.roles import ADMIN, OPERATOR, VIEWER, has_role, require_role
from console.fleet import charts, desired, services
from console.fleet.forms import NodeForm, NodeLabelsForm
from console.fleet.models import GatewayKey, Node


def _console_url(request: HttpRequest) -> str:
    return request.build_absolute_uri("/").rstrip("/")


def _rows(now: Any = None) -> list[dict[str, Any]]:
    """One row per node with everything the fleet table shows."""
    now = now or timezone.now()
    nodes = Node.objects.select_related(
        "desired_tier_config",
        "applied_tier_config",
        "desired_launch_profile",
        "applied_launch_profile",
    )
    rows = []
    for node in nodes:
        sample = node.last_sample or {}
        rows.append(
            {
                "node": node,
                "status": node.status(now),
                "sample": sample,
                "age_s": None
                if node.last_seen_at is None
                else max(0, int((now - node.last_seen_at).total_seconds())),
                "tiers": sorted((sample.get("tiers") or {}).items()),
                "gpu_util_pct": None
                if sample.get("gpu_util") is None
                else sample["gpu_util"] * 100,
                "kv_pct": None
                if sample.get("kv_cache_usage") is None
                else sample["kv_cache_usage"] * 100,
            }
        )
    return rows


@require_GET
@login_required
def node_list(request: HttpRequest) -> HttpResponse:
    require_role(request, VIEWER)
    return render(
        request,
        "fleet/node_list.html",
        {"rows": _rows(), "now": timezone.now(), "is_admin": has_role(request.user, ADMIN)},
    )


@require_GET
@login_required
@never_cache
def node_live(request: HttpRequest) -> HttpResponse:
    """The table body alone, for the page's 2-second refresh (live.js)."""
    require_role(request, VIEWER)
    return render(request, "fleet/_node_rows.html", {"rows": _rows(), "now": timezone.now()})


@require_http_methods(["GET", "POST"])
@login_required
@never_cache
def node_create(request: HttpRequest) -> HttpResponse:
    require_role(request, ADMIN)
    form = NodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        node, token = services.create_node(
            form.cleaned_data["name"], form.cleaned_data["labels"], request.user, request
        )
        return _token_page(request, node, token, created=True)
    return render(request, "fleet/node_form.html", {"form": form})


def _token_page(request: HttpRequest, node: Node, token: str, created: bool) -> HttpResponse:
    """The one time a node token is shown: rendered in the POST's own answer, never stored."""
    return render(
        request,
        "fleet/node_token.html",
        {
            "node": node,
            "token": token,
            "created": created,
            "commands": services.agent_commands(_console_url(request), token),
        },
    )


def _node_with_versions(pk: int) -> Node:
    return get_object_or_404(
        Node.objects.select_related(
            "desired_tier_config",
            "applied_tier_config",
            "desired_launch_profile",
            "applied_launch_profile",
        ),
        pk=pk,
    )


@require_GET
@login_required
def node_detail(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, VIEWER)
    node = _node_with_versions(pk)
    return render(
        request,
        "fleet/node_detail.html",
        {
            "node": node,
            "status": node.status(),
            "figure": charts.node_figure_dict(node),
            "endpoints": node.endpoints.all(),
            "keys": GatewayKey.objects.for_node(node),
            "is_admin": has_role(request.user, ADMIN),
            "can_operate": has_role(request.user, OPERATOR),
            "running_flags": json.dumps((node.engine or {}).get("args") or {}, indent=2),
        },
    )


@require_GET
@login_required
@never_cache
def node_status(request: HttpRequest, pk: int) -> HttpResponse:
    """The node page's status card alone, for its 2-second refresh (live.js)."""
    require_role(request, VIEWER)
    node = _node_with_versions(pk)
    return render(
        request,
        "fleet/_node_status.html",
        {"node": node, "status": node.status(), "can_operate": has_role(request.user, OPERATOR)},
    )


@require_GET
@login_required
@never_cache
def node_figure(request: HttpRequest, pk: int) -> HttpResponse:
    """The node page's last-hour chart as Plotly JSON, for its periodic redraw."""
    require_role(request, VIEWER)
    return HttpResponse(
        charts.node_figure_json(get_object_or_404(Node, pk=pk)), content_type="application/json"
    )


@require_POST
@login_required
def node_labels(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, ADMIN)
    node = get_object_or_404(Node, pk=pk)
    form = NodeLabelsForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Labels not saved: {form.errors['labels'][0]}")
    else:
        services.update_node(node, request.user, request, labels=form.cleaned_data["labels"])
        messages.success(request, f"Labels of {node.name} saved.")
    return redirect("fleet:node-detail", pk=node.pk)


@require_POST
@login_required
@never_cache
def node_rotate(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, ADMIN)
    node = get_object_or_404(Node, pk=pk)
    token = services.rotate_node_token(node, request.user, request)
    return _token_page(request, node, token, created=False)


@require_POST
@login_required
def node_delete(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, ADMIN)
    node = get_object_or_404(Node, pk=pk)
    try:
        services.delete_node(node, request.user, request)
    except services.FleetError as exc:
        messages.error(request, exc.message)
        return redirect("fleet:node-detail", pk=node.pk)
    messages.success(request, f"Node {node.name} deleted.")
    return redirect("fleet:node-list")


@require_POST
@login_required
def node_unset_desired(request: HttpRequest, pk: int, kind: str) -> HttpResponse:
    """Stop desiring a tier config or launch profile on this node (the agent keeps what it
    runs)."""
    require_role(request, OPERATOR)
    node = get_object_or_404(Node, pk=pk)
    try:
        desired.unset_desired(node, kind, request.user, request)
    except services.FleetError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{node.name} desires no {kind.replace('_', ' ')} now.")
    return redirect("fleet:node-detail", pk=pk)


@require_POST
@login_required
def node_acknowledge_error(request: HttpRequest, pk: int, kind: str) -> HttpResponse:
    require_role(request, OPERATOR)
    node = get_object_or_404(Node, pk=pk)
    try:
        desired.acknowledge_apply_error(node, kind, request.user, request)
    except services.FleetError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request, f"{kind.replace('_', ' ')} apply error of {node.name} acknowledged."
        )
    return redirect("fleet:node-detail", pk=pk)
