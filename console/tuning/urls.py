"""Pages under /tuning/, rollout pages (tuning:rollout-*) included."""

from __future__ import annotations

from django.urls import path

from console.tuning import views
from console.tuning.rollouts.urls import urlpatterns as rollout_urls
from console.tuning.views import LAUNCH_PROFILE, TIER_CONFIG

app_name = "tuning"
urlpatterns = [
    path("tier-configs/", views.version_list, {"kind": TIER_CONFIG}, name="tierconfig-list"),
    path(
        "tier-configs/new/", views.version_create, {"kind": TIER_CONFIG}, name="tierconfig-create"
    ),
    path(
        "tier-configs/<int:pk>/",
        views.version_detail,
        {"kind": TIER_CONFIG},
        name="tierconfig-detail",
    ),
    path(
        "tier-configs/<int:pk>/download/",
        views.version_download,
        {"kind": TIER_CONFIG},
        name="tierconfig-download",
    ),
    path(
        "tier-configs/<int:pk>/configmap/",
        views.version_configmap,
        {"kind": TIER_CONFIG},
        name="tierconfig-configmap",
    ),
    path(
        "launch-profiles/", views.version_list, {"kind": LAUNCH_PROFILE}, name="launchprofile-list"
    ),
    path(
        "launch-profiles/new/",
        views.version_create,
        {"kind": LAUNCH_PROFILE},
        name="launchprofile-create",
    ),
    path(
        "launch-profiles/<int:pk>/",
        views.version_detail,
        {"kind": LAUNCH_PROFILE},
        name="launchprofile-detail",
    ),
    path(
        "launch-profiles/<int:pk>/download/",
        views.version_download,
        {"kind": LAUNCH_PROFILE},
        name="launchprofile-download",
    ),
    path(
        "launch-profiles/<int:pk>/configmap/",
        views.version_configmap,
        {"kind": LAUNCH_PROFILE},
        name="launchprofile-configmap",
    ),
    path(
        "launch-profiles/<int:pk>/kubernetes/",
        views.launchprofile_kubernetes,
        name="launchprofile-kubernetes",
    ),
    path("nodes/<int:node_pk>/adopt-flags/", views.adopt_flags, name="adopt-flags"),
    *rollout_urls,
]
