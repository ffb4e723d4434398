"""Pages for tier configs and launch profiles. Both kinds are versioned documents that look
alike, so one set of views and templates serves both, parametrised by a `Kind`."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.core.ids import optional_id, parse_id
from console.core.roles import OPERATOR, VIEWER, has_role, require_role
from console.fleet.models import Node
from console.tuning import services
from console.tuning.configmaps import render_configmap
from console.tuning.diffs import display_rows
from console.tuning.editor import editor_defaults
from console.tuning.forms import LaunchProfileForm, TierConfigForm
from console.tuning.history import rollback_plan
from console.tuning.kube import dns_name, render_yaml
from console.tuning.models import LaunchProfileVersion, TierConfigVersion, VersionedDocument
from console.tuning.vllm_args import default_args
from scheduler import ConfigError, TierConfig, config_to_dict, default_config

NAMES_PER_PAGE = 20
VERSIONS_PER_GROUP = 10
VERSIONS_PER_PAGE = 50
DIFF_CHOICES = 300  # versions offered in the "compare with" list


@dataclass(frozen=True)
class Kind:
    key: str  # URL name prefix: "tierconfig" or "launchprofile"
    title: str
    plural: str
    model: type[VersionedDocument]
    form: type[TierConfigForm] | type[LaunchProfileForm]
    field: str  # the model's JSON field and the form's textarea
    create: Callable[..., VersionedDocument]
    starter: Callable[[], dict[str, Any]]  # what a blank create page is prefilled with

    def url(self, view: str) -> str:
        return f"tuning:{self.key}-{view}"

    # URL names for templates ({% url kind.detail_name pk %}).
    @property
    def list_name(self) -> str:
        return self.url("list")

    @property
    def create_name(self) -> str:
        return self.url("create")

    @property
    def detail_name(self) -> str:
        return self.url("detail")

    @property
    def download_name(self) -> str:
        return self.url("download")

    @property
    def configmap_name(self) -> str:
        return self.url("configmap")


TIER_CONFIG = Kind(
    "tierconfig",
    "Tier config",
    "Tier configs",
    TierConfigVersion,
    TierConfigForm,
    "config",
    services.create_tier_config,
    lambda: config_to_dict(default_config()),
)
LAUNCH_PROFILE = Kind(
    "launchprofile",
    "Launch profile",
    "Launch profiles",
    LaunchProfileVersion,
    LaunchProfileForm,
    "args",
    services.create_launch_profile,
    default_args,
)


def _document(obj: VersionedDocument) -> Any:
    return (
        getattr(obj, "config", None)
        if isinstance(obj, TierConfigVersion)
        else getattr(obj, "args", None)
    )


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2)


@login_required
@require_GET
def version_list(request: HttpRequest, kind: Kind) -> HttpResponse:
    """Grouped by name, the most recently changed name first; ?name= lists one name's versions."""
    require_role(request, VIEWER)
    model = kind.model
    only = request.GET.get("name", "")
    context: dict[str, Any] = {
        "kind": kind,
        "only": only,
        "can_create": has_role(request.user, OPERATOR),
    }
    if only:
        versions = model.objects.filter(name=only).select_related("author").order_by("-version")
        page = Paginator(versions, VERSIONS_PER_PAGE).get_page(request.GET.get("page"))
        context.update(
            page=page,
            groups=[{"name": only, "versions": list(page), "count": page.paginator.count}],
            query=urlencode({"name": only}),
        )
    else:
        names = (
            model.objects.values("name")
            .annotate(latest=Max("created_at"), count=Count("id"))
            .order_by("-latest", "name")
        )
        page = Paginator(names, NAMES_PER_PAGE).get_page(request.GET.get("page"))
        wanted = [row["name"] for row in page]
        by_name: dict[str, list[VersionedDocument]] = {name: [] for name in wanted}
        for obj in (
            model.objects.filter(name__in=wanted).select_related("author").order_by("-version")
        ):
            if len(by_name[obj.name]) < VERSIONS_PER_GROUP:
                by_name[obj.name].append(obj)
        groups = [
            {"name": row["name"], "versions": by_name[row["name"]], "count": row["count"]}
            for row in page
        ]
        context.update(page=page, groups=groups, query="")
    return render(request, "tuning/version_list.html", context)


@login_required
@require_GET
def version_detail(request: HttpRequest, kind: Kind, pk: int) -> HttpResponse:
    require_role(request, VIEWER)
    obj = get_object_or_404(kind.model.objects.select_related("author", "parent"), pk=pk)
    previous = obj.base()  # the version it was made from, else the number before
    against = previous
    raw = request.GET.get("against", "")
    if raw:
        against = get_object_or_404(kind.model, pk=parse_id(raw, "against"))
    others = kind.model.objects.exclude(pk=obj.pk).order_by("name", "-version")[:DIFF_CHOICES]
    context: dict[str, Any] = {
        "kind": kind,
        "obj": obj,
        "previous": previous,
        "against": against,
        "rows": display_rows(obj.diff_from(against)),  # type: ignore[arg-type]
        "others": others,
        "document": _pretty(_document(obj)),
        "can_create": has_role(request.user, OPERATOR),
        "rollback_plan": rollback_plan(obj),
    }
    if isinstance(obj, LaunchProfileVersion):
        context["command"] = obj.command
        context["kubernetes"] = render_yaml(obj.name, obj.launch_args(), version=obj.version)
    return render(request, "tuning/version_detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def version_create(request: HttpRequest, kind: Kind) -> HttpResponse:
    require_role(request, OPERATOR)
    source: VersionedDocument | None = None
    source_id = optional_id(request.GET.get("from"), "from")
    if source_id is not None:
        source = kind.model.objects.filter(pk=source_id).first()
    if request.method == "POST":
        form = kind.form(request.POST, request.FILES)
        if form.is_valid():
            try:
                obj = kind.create(
                    name=form.cleaned_data["name"],
                    message=form.cleaned_data["message"],
                    user=request.user,
                    request=request,
                    parent=form.cleaned_data.get("parent"),
                    **{kind.field: form.cleaned_data["document"]},
                )
            except (ConfigError, ValueError) as exc:  # validated above; kept for a schema race
                form.add_error(kind.field, str(exc))
            else:
                messages.success(request, f"Created {obj.label}.")
                return redirect(kind.url("detail"), pk=obj.pk)
    else:
        start = _document(source) if source is not None else kind.starter()
        form = kind.form(
            initial={
                "name": source.name if source else "",
                kind.field: _pretty(start),
                "parent": source.pk if source else None,
            }
        )
    context: dict[str, Any] = {"kind": kind, "form": form, "source": source}
    if kind is TIER_CONFIG:
        # The form editor builds its fields from the schema the scheduler validates with, and
        # fills an emptied box with the field's default (editor_defaults).
        context["tier_schema"] = TierConfig.model_json_schema()
        context["tier_defaults"] = editor_defaults()
    return render(request, "tuning/version_form.html", context)


def _attachment(body: str, content_type: str, filename: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
@require_GET
def version_download(request: HttpRequest, kind: Kind, pk: int) -> HttpResponse:
    """The JSON document alone (what `python -m scheduler validate` or an agent reads)."""
    require_role(request, VIEWER)
    obj = get_object_or_404(kind.model, pk=pk)
    return _attachment(
        _pretty(_document(obj)) + "\n",
        "application/json",
        f"{dns_name(obj.name)}-v{obj.version}.json",
    )


@login_required
@require_GET
def version_configmap(request: HttpRequest, kind: Kind, pk: int) -> HttpResponse:
    """The version as a Kubernetes ConfigMap (what the Git mirror commits)."""
    require_role(request, VIEWER)
    obj = get_object_or_404(kind.model.objects.select_related("author"), pk=pk)
    return _attachment(
        render_configmap(obj),
        "application/yaml",
        f"{dns_name(obj.name)}-v{obj.version}-configmap.yaml",
    )


@login_required
@require_GET
def launchprofile_kubernetes(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, VIEWER)
    obj = get_object_or_404(LaunchProfileVersion, pk=pk)
    return _attachment(
        render_yaml(obj.name, obj.launch_args(), version=obj.version),
        "application/yaml",
        f"{dns_name(obj.name)}-v{obj.version}.yaml",
    )


@login_required
@require_POST
def adopt_flags(request: HttpRequest, node_pk: int) -> HttpResponse:
    """The node page's "save running flags as a launch profile"."""
    require_role(request, OPERATOR)
    node = get_object_or_404(Node, pk=node_pk)
    name = request.POST.get("name", "").strip()
    try:
        adoption = services.adopt_running_flags(node, name, user=request.user, request=request)
    except (ConfigError, ValueError) as exc:
        messages.error(request, f"Not saved: {exc}")
        return redirect("fleet:node-detail", pk=node.pk)
    if adoption.created:
        messages.success(request, f"{adoption.summary}; {node.name} now wants it (no restart).")
    else:
        messages.info(request, f"{adoption.summary}.")
    return redirect(LAUNCH_PROFILE.url("detail"), pk=adoption.version.pk)
