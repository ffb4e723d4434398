"""What a run's target ran when the run started: the configuration snapshot
(docs/architecture.md#benchmarks)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from console.fleet.models import Endpoint, Node, TelemetrySample


def _version_ref(version: Any, content_field: str) -> dict[str, Any] | None:
    if version is None:
        return None
    return {
        "id": version.pk,
        "name": version.name,
        "version": version.version,
        content_field: getattr(version, content_field),
    }


def node_snapshot(node: Node) -> dict[str, Any]:
    """What a node ran when the run started: applied versions (the desired ones only stand in
    while nothing was applied yet), engine flags, GPU model from its latest sample."""
    last = TelemetrySample.objects.filter(node=node).order_by("-ts").first()
    gpus = [g.get("name") or "unknown" for g in (last.gpus if last else [])]
    tier = node.applied_tier_config or node.desired_tier_config
    profile = node.applied_launch_profile or node.desired_launch_profile
    return {
        "id": node.pk,
        "name": node.name,
        "mode": node.mode,
        "agent_version": node.agent_version,
        "tier_config": _version_ref(tier, "config"),
        "tier_config_applied": node.applied_tier_config_id is not None,
        "launch_profile": _version_ref(profile, "args"),
        "launch_profile_applied": node.applied_launch_profile_id is not None,
        "engine": {
            "model": (node.engine or {}).get("model"),
            "args": (node.engine or {}).get("args", {}),
            "simulated": node.is_simulated,
        },
        "gpu": {"models": gpus, "count": len(gpus), "source": last.gpu_source if last else None},
    }


def snapshot_config(endpoint: Endpoint) -> dict[str, Any]:
    nodes = [endpoint.node] if endpoint.node is not None else []
    return {
        "taken_at": timezone.now().isoformat(),
        "endpoint": {
            "id": endpoint.pk,
            "name": endpoint.name,
            "kind": endpoint.kind,
            "base_url": endpoint.base_url,
        },
        "nodes": [node_snapshot(n) for n in nodes],
    }
