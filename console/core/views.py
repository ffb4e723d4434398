"""Pages of the core app: the home page and /healthz."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from console.core.health import run_checks


@require_GET
@never_cache
def healthz(request: HttpRequest) -> HttpResponse:
    """Database, broker and worker. 200 while the database answers (the web process can
    serve); 503 otherwise. Broker or worker trouble shows as status "degraded"."""
    report = run_checks(include_worker=request.GET.get("worker", "1") != "0")
    database_ok = report["checks"]["database"]["ok"]  # type: ignore[index]
    status = 200 if database_ok else 503
    if "application/json" in request.headers.get("Accept", ""):
        return JsonResponse(report, status=status)
    return render(request, "core/healthz.html", {"report": report}, status=status)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    from django.urls import NoReverseMatch, reverse

    try:
        return redirect(reverse("fleet:node-list"))
    except NoReverseMatch:
        return render(request, "core/home.html")


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico on pages that name no icon (JSON, Swagger's assets)."""
    return HttpResponsePermanentRedirect(static("tiergate/favicon.svg"))
