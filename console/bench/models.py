"""Benchmark runs and their per-request samples (docs/architecture.md#benchmarks).

A run is written by two hands: the console creates it (pending) and the Celery task claims
it (running), reports progress into it, and stores the results. Status changes that race
(claim, cancel, lost-worker detection, finish) are conditional UPDATEs in services.py, so a
redelivered task or a late worker can never undo a decision already taken.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import models

from console.bench.choices import FINISHED, Preset, RunStatus, Side
from loadgen import ItlStats
from loadgen import RequestSample as LoadgenSample


class RunSeries(models.Model):
    """Repeats of one benchmark: N runs of one endpoint and workload (each with its own salt),
    so a comparison sees run-to-run variation. Two series made together for an A/B comparison
    run interleaved (A B A B ...) by one task; `partner` links them."""

    label = models.CharField(max_length=200, blank=True)
    side = models.CharField(max_length=1, choices=Side.choices, default=Side.A)
    partner = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    template = models.ForeignKey(
        "BenchmarkRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    repeats = models.PositiveSmallIntegerField()
    cancel_requested = models.BooleanField(default=False)
    celery_task_id = models.CharField(max_length=50, blank=True)
    # "Until decided" (adaptive.py): after each round the pair's decision is read again, and
    # another round is queued while it says "not enough data" and the budget allows.
    objective = models.CharField(max_length=30, blank=True)
    budget_runs = models.PositiveSmallIntegerField(null=True, blank=True)
    deadline = models.DateTimeField(null=True, blank=True)
    adaptive_state = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "run series"

    def __str__(self) -> str:
        return f"series {self.pk} ({self.repeats} runs) {self.label}".strip()

    @property
    def display(self) -> str:
        return str(self)

    @property
    def ref(self) -> str:
        """How the compare page and API name it: `s<id>`."""
        return f"s{self.pk}"


class BenchmarkRun(models.Model):
    label = models.CharField(max_length=200, blank=True)
    notes = models.TextField(blank=True)
    endpoint = models.ForeignKey(
        "fleet.Endpoint", on_delete=models.PROTECT, related_name="benchmark_runs"
    )
    model = models.CharField(max_length=200)
    preset = models.CharField(max_length=30, choices=Preset.choices, default=Preset.CUSTOM)
    workload = models.JSONField(help_text="WorkloadSpec.to_dict() (never holds the API key)")
    # Per-tier request shapes ({"online": {"weight", "prompt_tokens", "max_tokens"}, ...});
    # the task turns them into a prompts file, since one spec has one prompt/output length.
    tier_profiles = models.JSONField(default=dict, blank=True)

    status = models.CharField(
        max_length=12, choices=RunStatus.choices, default=RunStatus.PENDING, db_index=True
    )
    status_reason = models.CharField(max_length=500, blank=True)
    cancel_requested = models.BooleanField(default=False)
    celery_task_id = models.CharField(max_length=50, blank=True)

    progress_percent = models.FloatField(default=0.0)
    elapsed_s = models.FloatField(default=0.0)
    requests_done = models.IntegerField(default=0)
    errors = models.IntegerField(default=0)
    current_p99_ttft_s = models.FloatField(null=True, blank=True)

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Written with every progress report; a running run whose heartbeat goes quiet lost its worker.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    measured_from = models.DateTimeField(null=True, blank=True)
    measured_to = models.DateTimeField(null=True, blank=True)

    config_snapshot = models.JSONField(default=dict, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    timeseries = models.JSONField(default=list, blank=True)
    validity = models.JSONField(default=dict, blank=True)
    # [{"status", "message", "count", "first": {"index", "tier", "send_time"}}], most first.
    error_breakdown = models.JSONField(default=list, blank=True)
    # What the run inherited and met: prefix-cache reset, engine hit rate and preemptions over
    # the run, machine load before and after (probes.py).
    conditions = models.JSONField(default=dict, blank=True)
    series = models.ForeignKey(
        RunSeries, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "heartbeat_at"], name="bench_run_status_beat")]

    def __str__(self) -> str:
        return f"#{self.pk} {self.label or self.get_preset_display()}"

    @property
    def display(self) -> str:
        return str(self)

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED

    @property
    def is_active(self) -> bool:
        return self.status in (RunStatus.PENDING, RunStatus.RUNNING)

    @property
    def config_label(self) -> str:
        """The versions the run measured, from its snapshot: "tiers v3 · engine v2" per node
        ("" before it started, or for a target that is not a node gateway)."""
        parts = []
        for node in (self.config_snapshot or {}).get("nodes") or []:
            versions = [
                f"{ref['name']} v{ref['version']}"
                for ref in (node.get("tier_config"), node.get("launch_profile"))
                if isinstance(ref, dict) and ref.get("name")
            ]
            parts.append(" · ".join(versions) or "no versions")
        return ", ".join(parts)

    @property
    def slo(self) -> dict[str, float | None]:
        return {
            "ttft_ms": self.workload.get("slo_ttft_ms"),
            "tpot_ms": self.workload.get("slo_tpot_ms"),
        }

    @property
    def node_ids(self) -> list[int]:
        return [n["id"] for n in (self.config_snapshot or {}).get("nodes", []) if n.get("id")]

    def window(self) -> tuple[datetime, datetime] | None:
        if self.measured_from is None or self.measured_to is None:
            return None
        return (self.measured_from, self.measured_to)

    def audit_dict(self) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint_id,
            "model": self.model,
            "preset": self.preset,
            "label": self.label,
            "status": self.status,
            "workload": self.workload,
        }


class RequestSample(models.Model):
    """One request of a run as the load generator measured it. Seconds throughout."""

    run = models.ForeignKey(BenchmarkRun, on_delete=models.CASCADE, related_name="samples")
    index = models.IntegerField()
    tier = models.CharField(max_length=50, blank=True)
    stage = models.SmallIntegerField(default=0)
    warmup = models.BooleanField(default=False)
    send_time = models.FloatField(help_text="unix seconds")
    dispatch_lag = models.FloatField(default=0.0)
    ttft = models.FloatField(null=True)
    tpot = models.FloatField(null=True)
    e2e = models.FloatField(null=True)
    itl_count = models.IntegerField(default=0)
    itl_mean = models.FloatField(null=True)
    itl_p50 = models.FloatField(null=True)
    itl_p99 = models.FloatField(null=True)
    itl_max = models.FloatField(null=True)
    prompt_tokens = models.IntegerField(null=True)
    output_tokens = models.IntegerField(null=True)
    usage_missing = models.BooleanField(default=False)
    status = models.IntegerField(null=True, help_text="HTTP status")
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="bench_sample_run_index")
        ]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.index}"

    @classmethod
    def from_loadgen(cls, run_id: int, s: LoadgenSample) -> RequestSample:
        return cls(
            run_id=run_id,
            index=s.index,
            tier=s.tier or "",
            stage=s.stage,
            warmup=s.warmup,
            send_time=s.send_time,
            dispatch_lag=s.dispatch_lag,
            ttft=s.ttft,
            tpot=s.tpot,
            e2e=s.e2e,
            itl_count=s.itl.count,
            itl_mean=s.itl.mean,
            itl_p50=s.itl.p50,
            itl_p99=s.itl.p99,
            itl_max=s.itl.max,
            prompt_tokens=s.prompt_tokens,
            output_tokens=s.output_tokens,
            usage_missing=s.usage_missing,
            status=s.status,
            error=s.error or "",
        )

    def to_loadgen(self) -> LoadgenSample:
        """Back to the load generator's record, so its pure summarize() works on stored runs."""
        return LoadgenSample(
            index=self.index,
            send_time=self.send_time,
            tier=self.tier or None,
            stage=self.stage,
            warmup=self.warmup,
            dispatch_lag=self.dispatch_lag,
            ttft=self.ttft,
            e2e=self.e2e,
            tpot=self.tpot,
            itl=ItlStats(self.itl_count, self.itl_mean, self.itl_p50, self.itl_p99, self.itl_max),
            prompt_tokens=self.prompt_tokens,
            output_tokens=self.output_tokens,
            usage_missing=self.usage_missing,
            status=self.status,
            error=self.error or None,
        )


# Sweeps live in their own package; imported here so Django registers them with the app.
from console.bench.sweeps.models import Sweep, SweepTrial  # noqa: E402

__all__ = ["BenchmarkRun", "RequestSample", "RunSeries", "Sweep", "SweepTrial"]
