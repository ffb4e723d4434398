"""Gateway-key pages: list, create (the key is shown once), revoke."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from console.core.roles import ADMIN, VIEWER, has_role, require_role
from console.fleet import gateway_keys
from console.fleet.errors import FleetError
from console.fleet.forms import GatewayKeyForm
from console.fleet.models import GatewayKey


@require_http_methods(["GET", "POST"])
@login_required
@never_cache
def key_list(request: HttpRequest) -> HttpResponse:
    """Gateway keys; admins create one here and see it this once."""
    require_role(request, VIEWER)
    is_admin = has_role(request.user, ADMIN)
    form = GatewayKeyForm(request.POST or None) if is_admin else None
    created: tuple[GatewayKey, str] | None = None
    if request.method == "POST":
        require_role(request, ADMIN)
        if form is not None and form.is_valid():
            try:
                created = gateway_keys.create_gateway_key(
                    form.cleaned_data["name"],
                    form.cleaned_data["tiers"],
                    form.cleaned_data["default_tier"],
                    request.user,
                    nodes=list(form.cleaned_data["nodes"]) or None,
                    request=request,
                )
                form = GatewayKeyForm()
            except FleetError as exc:
                form.add_error(exc.field if exc.field in form.fields else None, exc.message)
    keys = (
        GatewayKey.objects.select_related("created_by")
        .prefetch_related("nodes")
        .order_by("revoked_at", "name")
    )
    return render(
        request,
        "fleet/key_list.html",
        {"keys": keys, "form": form, "created": created, "is_admin": is_admin},
    )


@require_POST
@login_required
def key_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, ADMIN)
    key = get_object_or_404(GatewayKey, pk=pk)
    gateway_keys.revoke_gateway_key(key, request.user, request)
    messages.success(request, f"Key {key.name} revoked; agents drop it on their next heartbeat.")
    return redirect("fleet:key-list")
