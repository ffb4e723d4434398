"""Pages under /fleet/."""

from __future__ import annotations

from django.urls import path

from console.fleet.views import endpoints as endpoint_views
from console.fleet.views import keys as key_views
from console.fleet.views import nodes as views

app_name = "fleet"
urlpatterns = [
    path("", views.node_list, name="node-list"),
    path("live/", views.node_live, name="node-live"),
    path("nodes/new/", views.node_create, name="node-create"),
    path("nodes/<int:pk>/", views.node_detail, name="node-detail"),
    path("nodes/<int:pk>/status/", views.node_status, name="node-status"),
    path("nodes/<int:pk>/figure/", views.node_figure, name="node-figure"),
    path("nodes/<int:pk>/labels/", views.node_labels, name="node-labels"),
    path("nodes/<int:pk>/rotate-token/", views.node_rotate, name="node-rotate"),
    path("nodes/<int:pk>/delete/", views.node_delete, name="node-delete"),
    path(
        "nodes/<int:pk>/unset-desired/<slug:kind>/",
        views.node_unset_desired,
        name="node-unset-desired",
    ),
    path(
        "nodes/<int:pk>/acknowledge-error/<slug:kind>/",
        views.node_acknowledge_error,
        name="node-acknowledge-error",
    ),
    path("keys/", key_views.key_list, name="key-list"),
    path("keys/<int:pk>/revoke/", key_views.key_revoke, name="key-revoke"),
    path("endpoints/", endpoint_views.endpoint_list, name="endpoint-list"),
    path("endpoints/new/", endpoint_views.endpoint_edit, name="endpoint-create"),
    path("endpoints/import/", endpoint_views.endpoint_import, name="endpoint-import"),
    path("endpoints/<int:pk>/", endpoint_views.endpoint_detail, name="endpoint-detail"),
    path("endpoints/<int:pk>/edit/", endpoint_views.endpoint_edit, name="endpoint-edit"),
    path("endpoints/<int:pk>/delete/", endpoint_views.endpoint_delete, name="endpoint-delete"),
    path("endpoints/<int:pk>/doctor/", endpoint_views.endpoint_doctor, name="endpoint-doctor"),
    path(
        "endpoints/<int:pk>/fetch-models/",
        endpoint_views.endpoint_fetch_models,
        name="endpoint-fetch-models",
    ),
]
