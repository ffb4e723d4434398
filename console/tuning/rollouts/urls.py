"""Rollout pages, mounted by console/tuning/urls.py under /tuning/ (names tuning:rollout-*)."""

from __future__ import annotations

from django.urls import path

from console.tuning.rollouts import views

urlpatterns = [
    path("rollouts/", views.rollout_list, name="rollout-list"),
    path("rollouts/new/", views.rollout_create, name="rollout-create"),
    path("rollouts/<int:pk>/", views.rollout_detail, name="rollout-detail"),
    path("rollouts/<int:pk>/live/", views.rollout_live, name="rollout-live"),
    path("rollouts/<int:pk>/abort/", views.rollout_abort, name="rollout-abort"),
    path("rollouts/<int:pk>/resume/", views.rollout_resume, name="rollout-resume"),
    path("rollouts/<int:pk>/rollback/", views.rollout_rollback, name="rollout-rollback"),
    path("<str:kind>/<int:pk>/roll-back/", views.version_rollback, name="version-rollback"),
]
