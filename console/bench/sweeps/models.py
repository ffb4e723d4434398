"""Sweeps (docs/sweeps.md): a node, a base version, variables and their values, a workload,
repeats, constraints and an objective; each trial an ordinary benchmark series.

A Sweep is written by two hands like a benchmark run: services.create_sweep makes it (pending,
with its base trial, index 0) and the Celery task claims it under a lease (the same fields and
meaning as a rollout's), runs trial after trial and records each before the next, so a
restarted worker resumes by asking the planner again (planner.next_trial over the stored
trials).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from console.bench.choices import Preset
from console.bench.sweeps import spec as sweep_spec
from console.bench.sweeps.choices import (
    ACTIVE,
    FINISHED,
    Objective,
    SweepKind,
    SweepMode,
    SweepStatus,
    TrialStatus,
)


class Sweep(models.Model):
    name = models.CharField(max_length=200, blank=True)
    node = models.ForeignKey("fleet.Node", on_delete=models.PROTECT, related_name="sweeps")
    # Where the trials' benchmarks go: an endpoint that reaches the node's gateway.
    endpoint = models.ForeignKey("fleet.Endpoint", on_delete=models.PROTECT, related_name="+")
    model = models.CharField(max_length=200)
    kind = models.CharField(max_length=20, choices=SweepKind.choices)
    # The node's versions of both kinds when the sweep was created (the swept kind's is set);
    # the node is put back on them at the end, on cancel and on failure.
    base_tier_config = models.ForeignKey(
        "tuning.TierConfigVersion",
        on_delete=models.PROTECT,
        related_name="+",
        null=True,
        blank=True,
    )
    base_launch_profile = models.ForeignKey(
        "tuning.LaunchProfileVersion",
        on_delete=models.PROTECT,
        related_name="+",
        null=True,
        blank=True,
    )
    mode = models.CharField(max_length=12, choices=SweepMode.choices, default=SweepMode.ONE)
    # [{"path": "scheduler.queues.online.max_waiting_time_ms", "values": [1, 5, 10]}]
    variables = models.JSONField(default=list)
    # The workload, exactly as a BenchmarkRun holds it.
    preset = models.CharField(max_length=30, choices=Preset.choices, default=Preset.CUSTOM)
    workload = models.JSONField(help_text="WorkloadSpec.to_dict() (never holds the API key)")
    tier_profiles = models.JSONField(default=dict, blank=True)
    repeats = models.PositiveSmallIntegerField(default=1, help_text="Runs per trial, 1-10")
    # {"min_throughput_rps": float|null, "max_error_rate": float|null,
    #  "max_ttft_p99_ms": {"online": 500, ...}}
    constraints = models.JSONField(default=dict, blank=True)
    objective = models.CharField(
        max_length=30, choices=Objective.choices, default=Objective.MIN_ONLINE_TTFT_P99
    )

    status = models.CharField(
        max_length=12, choices=SweepStatus.choices, default=SweepStatus.PENDING, db_index=True
    )
    status_reason = models.CharField(max_length=500, blank=True)
    cancel_requested = models.BooleanField(default=False)
    celery_task_id = models.CharField(max_length=50, blank=True)
    # The worker executing it holds a lease it renews; an expired lease lets another resume.
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    trials_planned = models.PositiveIntegerField(default=0, help_text="Upper bound, base included")
    trials_done = models.PositiveIntegerField(default=0)
    eta_s = models.FloatField(null=True, blank=True)

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, related_name="+", null=True, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    best_trial = models.ForeignKey(
        "SweepTrial", on_delete=models.SET_NULL, related_name="+", null=True, blank=True
    )
    adopted_trial = models.ForeignKey(
        "SweepTrial", on_delete=models.SET_NULL, related_name="+", null=True, blank=True
    )
    adopted_rollout = models.ForeignKey(
        "tuning.Rollout", on_delete=models.SET_NULL, related_name="+", null=True, blank=True
    )
    restored = models.BooleanField(default=False, help_text="The node is back on its base")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "lease_until"], name="bench_sweep_status_lease")]

    def __str__(self) -> str:
        return f"sweep #{self.pk} {self.name}".strip()

    @property
    def display(self) -> str:
        return str(self)

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE

    @property
    def base_version(self) -> Any:
        """The base version of the swept kind."""
        if self.kind == SweepKind.TIER_CONFIG:
            return self.base_tier_config
        return self.base_launch_profile

    def spec(self) -> sweep_spec.SweepSpec:
        """What it searches, parsed from the stored fields (checked when it was created)."""
        return sweep_spec.parse_spec(
            {
                "kind": self.kind,
                "mode": self.mode,
                "variables": self.variables,
                "constraints": self.constraints,
                "objective": self.objective,
            }
        )

    def audit_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "node": self.node_id,
            "endpoint": self.endpoint_id,
            "model": self.model,
            "kind": self.kind,
            "base_tier_config": self.base_tier_config_id,
            "base_launch_profile": self.base_launch_profile_id,
            "mode": self.mode,
            "variables": self.variables,
            "preset": self.preset,
            "repeats": self.repeats,
            "constraints": self.constraints,
            "objective": self.objective,
            "status": self.status,
        }


class SweepTrial(models.Model):
    sweep = models.ForeignKey(Sweep, on_delete=models.CASCADE, related_name="trials")
    index = models.PositiveIntegerField(help_text="0: the base, measured like any trial")
    is_base = models.BooleanField(default=False)
    values = models.JSONField(default=dict, blank=True, help_text="{path: value}; {} for the base")
    # The full candidate: the tier config document or the launch args.
    document = models.JSONField(default=dict, blank=True)
    # The version the trial ran: the base itself for the base trial, else one made for it.
    tier_config = models.ForeignKey(
        "tuning.TierConfigVersion",
        on_delete=models.PROTECT,
        related_name="+",
        null=True,
        blank=True,
    )
    launch_profile = models.ForeignKey(
        "tuning.LaunchProfileVersion",
        on_delete=models.PROTECT,
        related_name="+",
        null=True,
        blank=True,
    )
    status = models.CharField(
        max_length=12, choices=TrialStatus.choices, default=TrialStatus.PENDING
    )
    # Its runs are the repeats, each an ordinary BenchmarkRun with its config snapshot.
    series = models.ForeignKey(
        "bench.RunSeries", on_delete=models.SET_NULL, related_name="+", null=True, blank=True
    )
    metrics = models.JSONField(default=dict, blank=True, help_text="scoring.trial_metrics")
    feasible = models.BooleanField(null=True, blank=True)
    violations = models.JSONField(default=list, blank=True)
    objective_value = models.FloatField(null=True, blank=True)
    # The decision against the base trial (decisions.Decision.as_dict; {} for the base, or
    # when the base measured nothing): a trial is the best only when it reads "better".
    decision = models.JSONField(default=dict, blank=True)
    apply_s = models.FloatField(null=True, blank=True)
    bench_s = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["sweep", "index"]
        constraints = [
            models.UniqueConstraint(fields=["sweep", "index"], name="bench_sweeptrial_index")
        ]

    def __str__(self) -> str:
        return f"sweep #{self.sweep_id} trial {self.index}"

    @property
    def display(self) -> str:
        return "base" if self.is_base else f"trial {self.index}: {self.values_label}"

    @property
    def values_label(self) -> str:
        return ", ".join(f"{path}={value}" for path, value in self.values.items()) or "base"

    @property
    def version(self) -> Any:
        return self.tier_config if self.tier_config_id else self.launch_profile
