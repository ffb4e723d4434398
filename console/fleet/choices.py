"""Choices of the fleet app: one source of truth for every enumerated value."""

from __future__ import annotations

from django.db import models


class EndpointKind(models.TextChoices):
    GATEWAY = "gateway", "Node gateway"
    VLLM = "vllm", "vLLM direct"
    EXTERNAL = "external", "External OpenAI-compatible"


class NodeMode(models.TextChoices):
    UNKNOWN = "", "Not yet seen"
    MANAGED = "managed", "Managed (agent runs the engine)"
    ATTACHED = "attached", "Attached (engine runs on its own)"


class GpuSource(models.TextChoices):
    NVML = "nvml", "NVML"
    SIMULATED = "simulated", "Simulated"
    NONE = "none", "None"


class NodeStatus(models.TextChoices):
    """What the fleet page shows; derived from the last heartbeat, never stored."""

    NEW = "new", "never seen"
    HEALTHY = "healthy", "healthy"
    DEGRADED = "degraded", "degraded"
    DOWN = "down", "engine down"
    STALE = "stale", "stale"
