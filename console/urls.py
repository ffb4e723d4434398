"""URL map. Each app mounts its pages at the root and its API under /api/v1/."""

from __future__ import annotations

from django.contrib import admin
from django.urls import URLPattern, URLResolver, include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny

api_v1: list[URLPattern | URLResolver] = [
    path("schema/", SpectacularAPIView.as_view(permission_classes=[AllowAny]), name="schema"),
    path(
        "docs/",
        SpectacularSwaggerView.as_view(url_name="schema", permission_classes=[AllowAny]),
        name="swagger-ui",
    ),
    path("", include("console.accounts.api.urls")),
    path("", include("console.audit.api.urls")),
    path("", include("console.tuning.api.urls")),
    path("", include("console.fleet.api.urls")),
    path("", include("console.bench.api.urls")),
]

urlpatterns = [
    path("", include("console.core.urls")),
    path("accounts/", include("console.accounts.urls")),
    path("audit/", include("console.audit.urls")),
    path("tuning/", include("console.tuning.urls")),
    path("fleet/", include("console.fleet.urls")),
    path("benchmarks/", include("console.bench.urls")),
    path("playground/", include("console.playground.urls")),
    path("api/v1/", include(api_v1)),
    path("admin/", admin.site.urls),
]
