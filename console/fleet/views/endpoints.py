"""Endpoint pages: list, create/edit (the key is write-only), detail with the connection
doctor, model fetching and env export, env import."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.core.roles import ADMIN, OPERATOR, VIEWER, has_role, require_role
from console.fleet import probes, services
from console.fleet.doctor import plural
from console.fleet.endpoint_models import keep_found_models
from console.fleet.envfile import EnvError, render_env
from console.fleet.forms import EndpointForm, EnvImportForm
from console.fleet.models import Endpoint, base_url_hint


@require_GET
@login_required
def endpoint_list(request: HttpRequest) -> HttpResponse:
    require_role(request, VIEWER)
    return render(
        request,
        "fleet/endpoint_list.html",
        {
            "endpoints": Endpoint.objects.select_related("node"),
            "is_admin": has_role(request.user, ADMIN),
        },
    )


def _detail(
    request: HttpRequest, endpoint: Endpoint, steps: list[dict[str, Any]] | None = None
) -> HttpResponse:
    env = render_env(
        endpoint.name,
        endpoint.base_url,
        endpoint.api_key_masked,
        list(endpoint.models),
        endpoint.default_model,
    )
    return render(
        request,
        "fleet/endpoint_detail.html",
        {
            "endpoint": endpoint,
            "env": env,
            "steps": steps,
            "is_admin": has_role(request.user, ADMIN),
            "is_operator": has_role(request.user, OPERATOR),
        },
    )


@require_GET
@login_required
def endpoint_detail(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, VIEWER)
    return _detail(request, get_object_or_404(Endpoint.objects.select_related("node"), pk=pk))


@require_http_methods(["GET", "POST"])
@login_required
@never_cache
def endpoint_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    require_role(request, ADMIN)
    endpoint = get_object_or_404(Endpoint, pk=pk) if pk is not None else None
    form = EndpointForm(request.POST or None, instance=endpoint)
    if request.method == "POST" and form.is_valid():
        data = dict(form.cleaned_data)
        if endpoint is None:
            endpoint = services.create_endpoint(request.user, request, **data)
            messages.success(request, f"Endpoint {endpoint.name} created.")
        else:
            endpoint = services.update_endpoint(endpoint, request.user, request, **data)
            messages.success(request, f"Endpoint {endpoint.name} saved.")
        hint = base_url_hint(endpoint.base_url)
        if hint:
            messages.warning(request, hint)
        return redirect("fleet:endpoint-detail", pk=endpoint.pk)
    return render(request, "fleet/endpoint_form.html", {"form": form, "endpoint": endpoint})


@require_POST
@login_required
def endpoint_delete(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, ADMIN)
    endpoint = get_object_or_404(Endpoint, pk=pk)
    try:
        services.delete_endpoint(endpoint, request.user, request)
    except services.FleetError as exc:
        messages.error(request, exc.message)
        return redirect("fleet:endpoint-detail", pk=pk)
    messages.success(request, f"Endpoint {endpoint.name} deleted.")
    return redirect("fleet:endpoint-list")


@require_POST
@login_required
def endpoint_doctor(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, OPERATOR)
    endpoint = get_object_or_404(Endpoint.objects.select_related("node"), pk=pk)
    steps, found = probes.diagnose(
        endpoint.base_url, endpoint.get_api_key(), endpoint.default_model
    )
    # What the test found is kept: the playground and benchmarks offer these models.
    endpoint = keep_found_models(endpoint, found, request.user, request)
    return _detail(request, endpoint, [s.as_dict() for s in steps])


@require_POST
@login_required
def endpoint_fetch_models(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, ADMIN)
    endpoint = get_object_or_404(Endpoint, pk=pk)
    try:
        _, ids = probes.fetch_models(endpoint.base_url, endpoint.get_api_key())
    except probes.FetchError as exc:
        return _detail(request, endpoint, [exc.step.as_dict()])
    services.set_endpoint_models(endpoint, ids, request.user, request)
    messages.success(request, f"{plural(len(ids), 'model')} fetched.")
    return redirect("fleet:endpoint-detail", pk=endpoint.pk)


@require_http_methods(["GET", "POST"])
@login_required
@never_cache
def endpoint_import(request: HttpRequest) -> HttpResponse:
    require_role(request, ADMIN)
    form = EnvImportForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            found = services.import_env(
                form.cleaned_data["text"], request.user, request, kind=form.cleaned_data["kind"]
            )
        except (services.FleetError, EnvError) as exc:
            form.add_error("text", str(exc))
        else:
            messages.success(request, "Imported: " + ", ".join(e.name for e in found))
            return redirect("fleet:endpoint-list")
    return render(request, "fleet/endpoint_import.html", {"form": form})
