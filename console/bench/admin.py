"""Django admin for benchmark runs: read-only views for inspection. Runs are created and
cancelled through the console's pages or API, which queue and stop their Celery tasks."""

from __future__ import annotations

from typing import Any

from django.contrib import admin

from console.bench.models import BenchmarkRun, RunSeries, Sweep, SweepTrial


@admin.register(BenchmarkRun)
class BenchmarkRunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "label",
        "endpoint",
        "model",
        "preset",
        "status",
        "progress_percent",
        "created_at",
    )
    list_filter = ("status", "preset")
    search_fields = ("label", "model", "endpoint__name")

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(RunSeries)
class RunSeriesAdmin(admin.ModelAdmin):
    list_display = ("id", "label", "side", "repeats", "partner", "cancel_requested", "created_at")

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False


class SweepTrialInline(admin.TabularInline):
    model = SweepTrial
    fields = ("index", "values", "status", "feasible", "objective_value", "violations", "series")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(Sweep)
class SweepAdmin(admin.ModelAdmin):
    """Read-only: sweeps are created, cancelled and adopted through the pages or the API."""

    list_display = ("id", "name", "node", "kind", "mode", "status", "trials_done", "created_at")
    list_filter = ("status", "kind", "mode")
    search_fields = ("name", "node__name")
    inlines = (SweepTrialInline,)

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False
