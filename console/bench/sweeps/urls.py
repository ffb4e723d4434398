"""Sweep pages, mounted by console/bench/urls.py under /benchmarks/ (names bench:sweep-*)."""

from __future__ import annotations

from django.urls import path

from console.bench.sweeps import views

urlpatterns = [
    path("sweeps/", views.sweep_list, name="sweep-list"),
    path("sweeps/new/", views.sweep_create, name="sweep-create"),
    path("sweeps/<int:pk>/", views.sweep_detail, name="sweep-detail"),
    path("sweeps/<int:pk>/live/", views.sweep_live, name="sweep-live"),
    path("sweeps/<int:pk>/cancel/", views.sweep_cancel, name="sweep-cancel"),
    path("sweeps/<int:pk>/adopt/", views.sweep_adopt, name="sweep-adopt"),
]
