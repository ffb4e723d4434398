from __future__ import annotations

from typing import Any

from django.contrib import admin

from console.audit.models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ("created_at", "actor_name", "action", "object_type", "object_repr")
    list_filter = ("action", "object_type")
    search_fields = ("actor_name", "object_repr", "message")

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False
