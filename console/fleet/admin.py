"""Django admin for the fleet models. Secrets are never shown: endpoint keys appear masked,
token and key hashes are read-only, and creating nodes or keys (which must show a secret once)
happens in the console's own pages or API, not here."""

from __future__ import annotations

from typing import Any

from django.contrib import admin

from console.fleet.models import Endpoint, GatewayKey, Node, TelemetrySample


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "base_url", "api_key_masked", "default_model", "node")
    list_filter = ("kind",)
    search_fields = ("name", "base_url")
    fields = (
        "name",
        "kind",
        "base_url",
        "api_key_masked",
        "models",
        "default_model",
        "node",
        "created_at",
        "updated_at",
    )
    readonly_fields = ("api_key_masked", "created_at", "updated_at")

    def has_add_permission(self, request: Any) -> bool:
        return False  # a key can only be entered through the console's pages or API


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ("name", "mode", "last_seen_at", "applied_tier_config", "desired_tier_config")
    search_fields = ("name",)
    readonly_fields = (
        "token_sha256",
        "applied_tier_config",
        "applied_launch_profile",
        "apply_errors",
        "mode",
        "agent_version",
        "listen_url",
        "engine",
        "health",
        "last_sample",
        "last_seen_at",
        "keys_version",
        "created_at",
    )

    def has_add_permission(self, request: Any) -> bool:
        return False  # the token must be shown once: create nodes in the fleet page or API


@admin.register(GatewayKey)
class GatewayKeyAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "prefix",
        "default_tier",
        "all_nodes",
        "created_by",
        "created_at",
        "revoked_at",
    )
    list_filter = ("all_nodes",)
    search_fields = ("name", "prefix")
    readonly_fields = ("sha256", "prefix", "tiers", "default_tier", "created_by", "created_at")

    def has_add_permission(self, request: Any) -> bool:
        return False


@admin.register(TelemetrySample)
class TelemetrySampleAdmin(admin.ModelAdmin):
    list_display = ("node", "ts", "gpu_source", "gpu_util", "kv_cache_usage", "queue_depth")
    list_filter = ("gpu_source",)
    date_hierarchy = "ts"

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False
