"""Pages under /benchmarks/, sweep pages (bench:sweep-*) included."""

from __future__ import annotations

from django.urls import path

from console.bench import compare_views, views
from console.bench.sweeps.urls import urlpatterns as sweep_urls

app_name = "bench"
urlpatterns = [
    path("", views.run_list, name="run-list"),
    path("new/", views.run_create, name="run-create"),
    path("quick/", views.run_quick, name="run-quick"),
    path("compare/", compare_views.compare, name="compare"),
    path("compare/repeat/", views.repeat_pair, name="repeat-pair"),
    path("compare/decide/", compare_views.decide, name="decide"),
    path("<int:pk>/repeat/", views.run_repeat, name="run-repeat"),
    path("series/<int:pk>/cancel/", views.series_cancel, name="series-cancel"),
    path("<int:pk>/", views.run_detail, name="run-detail"),
    path("<int:pk>/progress/", views.run_progress, name="run-progress"),
    path("<int:pk>/info/", views.run_info, name="run-info"),
    path("<int:pk>/cancel/", views.run_cancel, name="run-cancel"),
    path("<int:pk>/export.json", views.run_export_json, name="run-export-json"),
    path("<int:pk>/export.csv", views.run_export_csv, name="run-export-csv"),
    *sweep_urls,
]
