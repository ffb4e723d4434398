"""Read-only admin: versions are immutable, so the admin shows them and changes nothing."""

from __future__ import annotations

from typing import Any

from django.contrib import admin

from console.tuning.models import LaunchProfileVersion, TierConfigVersion


class _ImmutableAdmin(admin.ModelAdmin):
    list_display: tuple[str, ...] = ("name", "version", "message", "author", "created_at")
    list_filter = ("name",)
    search_fields = ("name", "message")
    ordering = ("name", "-version")

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(TierConfigVersion)
class TierConfigVersionAdmin(_ImmutableAdmin):
    pass


@admin.register(LaunchProfileVersion)
class LaunchProfileVersionAdmin(_ImmutableAdmin):
    list_display = ("name", "version", "message", "author", "created_at", "command")
