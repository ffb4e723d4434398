"""A playground comparison: the conversation and parameters, and one Side per endpoint."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from console.fleet.models import Endpoint


class SideStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Streaming"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


FINISHED = (SideStatus.DONE, SideStatus.FAILED)


class Comparison(models.Model):
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    title = models.CharField(max_length=120)
    messages = models.JSONField(help_text='[{"role": "user", "content": "..."}, ...]')
    max_tokens = models.PositiveIntegerField()
    temperature = models.FloatField()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"#{self.pk} {self.title}"


class Side(models.Model):
    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="sides")
    name = models.CharField(max_length=1, choices=[("a", "A"), ("b", "B")])
    endpoint = models.ForeignKey(Endpoint, null=True, on_delete=models.SET_NULL, related_name="+")
    endpoint_name = models.CharField(max_length=100, help_text="As it was named at the time")
    model = models.CharField(max_length=200)
    tier = models.CharField(max_length=50, blank=True, help_text="X-Tiergate-Tier; empty: default")
    served_tier = models.CharField(
        max_length=50,
        blank=True,
        help_text="The tier the gateway answered in (its X-Tiergate-Tier header); empty: "
        "not a gateway, or no answer",
    )
    status = models.CharField(max_length=10, choices=SideStatus.choices, default=SideStatus.PENDING)
    text = models.TextField(blank=True)
    reasoning = models.TextField(blank=True)
    error = models.TextField(blank=True)
    ttft_ms = models.FloatField(null=True, blank=True)
    tpot_ms = models.FloatField(null=True, blank=True)
    e2e_ms = models.FloatField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["comparison", "name"], name="playground_one_side_each")
        ]

    def __str__(self) -> str:
        return f"{self.comparison_id}{self.name}: {self.endpoint_name} / {self.model}"

    @property
    def tier_shown(self) -> str:
        """What the page says of the tier: the one the gateway answered in; before the answer
        (or from an endpoint that is not a gateway) what was asked, else the key's default."""
        if self.served_tier:
            return self.served_tier
        if self.tier:
            return self.tier
        if self.status in FINISHED:
            return "none (not a gateway)" if not self.error else "—"
        return "the key's default"

    def result(self) -> dict[str, object]:
        """What the page shows of a finished side (the SSE `done` event's data)."""
        return {
            "status": self.status,
            "error": self.error,
            "text": self.text,
            "reasoning": self.reasoning,
            "ttft_ms": self.ttft_ms,
            "tpot_ms": self.tpot_ms,
            "e2e_ms": self.e2e_ms,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "tier": self.tier_shown,
            "model": self.model,
            "endpoint": self.endpoint_name,
        }
