"""Rollouts (docs/architecture.md#rollouts-and-rollbacks): which versions go to which nodes, how,
and what happened.

A Rollout is the request and its overall state; a RolloutNode is one node's part in it (its
wave, the versions it is moved to, the versions it desired before, and how far it got); a
RolloutEvent is one line of the timeline. Every step the executor takes is persisted on these
rows before and after it happens, so a restarted worker picks up exactly where the last one
stopped (see rollouts/executor.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import models

from console.tuning.rollouts.choices import (
    ACTIVE_STATES,
    EventLevel,
    GuardWhenQuiet,
    NodeSelection,
    NodeState,
    RolloutKind,
    RolloutState,
    StaleTargets,
)
from console.tuning.rollouts.guard import DEFAULT_TIER

_VERSION_FK: dict[str, Any] = {
    "null": True,
    "blank": True,
    "on_delete": models.PROTECT,
    "related_name": "+",
}


class RolloutQuerySet(models.QuerySet["Rollout"]):
    def with_progress(self) -> RolloutQuerySet:
        """Newest first, with `node_count` and `nodes_done` (applied and healthy) per rollout."""
        return (
            self.select_related("tier_config", "launch_profile", "created_by")
            .annotate(
                node_count=models.Count("nodes"),
                nodes_done=models.Count("nodes", filter=models.Q(nodes__state=NodeState.HEALTHY)),
            )
            .order_by("-created_at", "-id")
        )


class Rollout(models.Model):
    kind = models.CharField(max_length=10, choices=RolloutKind.choices, default=RolloutKind.ROLLOUT)
    rollback_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="rollbacks",
    )
    # The headline target; None on a rollback whose nodes go back to different versions
    # (each RolloutNode holds its own target).
    tier_config = models.ForeignKey("tuning.TierConfigVersion", **_VERSION_FK)
    launch_profile = models.ForeignKey("tuning.LaunchProfileVersion", **_VERSION_FK)
    message = models.CharField(max_length=500, blank=True)

    # How the nodes were chosen, as the operator said it (the resolved list is RolloutNode).
    node_selection = models.CharField(
        max_length=10, choices=NodeSelection.choices, default=NodeSelection.ALL
    )
    label = models.CharField(max_length=100, blank=True)

    stale_targets = models.CharField(
        max_length=10,
        choices=StaleTargets.choices,
        default=StaleTargets.EXCLUDE,
        help_text="What to do with targets that are stale or never seen",
    )
    # The targets left out because they were stale or never seen: [{"id", "name", "status"}].
    excluded_nodes = models.JSONField(default=list, blank=True)

    canary_count = models.PositiveIntegerField(
        default=1, help_text="Nodes in the first wave; 0: no canary"
    )
    wave_size = models.PositiveIntegerField(
        default=0, help_text="Nodes per later wave; 0: all the rest at once"
    )
    convergence_timeout_s = models.FloatField(
        default=120.0, help_text="Per wave, to applied and healthy"
    )
    guard_max_ttft_p99_regression_pct = models.FloatField(null=True, blank=True)
    guard_max_error_rate = models.FloatField(
        null=True, blank=True, help_text="0-1, errors and rejections"
    )
    canary_soak_s = models.FloatField(
        default=60.0, help_text="How long the canary wave runs before the next wave; 0: no soak"
    )
    guard_window_s = models.FloatField(
        default=30.0, help_text="Observation window after each later wave (with a guard)"
    )
    guard_tier = models.CharField(
        max_length=50, default=DEFAULT_TIER, help_text="Tier whose TTFT P99 is guarded"
    )
    guard_when_quiet = models.CharField(
        max_length=10,
        choices=GuardWhenQuiet.choices,
        default=GuardWhenQuiet.PROBE,
        help_text="A watched wave with too few requests to judge: probe it, or pause and ask",
    )
    guard_probe_s = models.FloatField(default=10.0, help_text="Seconds of probe load, per probe")
    # What the guard's verdicts rested on, summed over the waves it judged (probe requests
    # included), and the watched waves an operator let go on without a verdict.
    guarded_requests = models.PositiveIntegerField(default=0)
    unguarded_waves = models.PositiveIntegerField(default=0)
    # The current wave's probe before its change (probe.py), when no node is left on the old
    # versions to probe beside it: {"wave", "started_at", "nodes", "stats"} or {"wave", "error"}.
    probe_before = models.JSONField(default=dict, blank=True)

    state = models.CharField(
        max_length=15, choices=RolloutState.choices, default=RolloutState.PENDING
    )
    reason = models.TextField(blank=True, help_text="Why it ended (or is rolling back) this way")
    # While rolling back: the state to end in (rolled_back, aborted or failed).
    outcome = models.CharField(max_length=15, choices=RolloutState.choices, blank=True)
    abort_requested = models.BooleanField(default=False)
    current_wave = models.PositiveIntegerField(default=0)
    wave_started_at = models.DateTimeField(null=True, blank=True)
    guard_since = models.DateTimeField(
        null=True, blank=True, help_text="Start of the current wave's window"
    )
    revert_started_at = models.DateTimeField(null=True, blank=True)

    # The worker executing it holds a lease it renews; an expired lease lets another resume.
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)

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

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state"], name="tuning_rollout_state")]

    objects = RolloutQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.get_kind_display()} #{self.pk}"

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def can_roll_back(self) -> bool:
        """A finished rollout (not a rollback: undo that with a new rollout) can be undone."""
        return self.kind == RolloutKind.ROLLOUT and self.state in (
            RolloutState.SUCCEEDED,
            RolloutState.FAILED,
        )

    @property
    def has_guard(self) -> bool:
        return (
            self.guard_max_ttft_p99_regression_pct is not None
            or self.guard_max_error_rate is not None
        )

    def is_canary_wave(self, wave: int) -> bool:
        return wave == 0 and self.canary_count > 0 and self.kind == RolloutKind.ROLLOUT

    def observation_s(self, wave: int) -> float:
        """How long a wave is watched once applied and healthy before the next one starts:
        the canary for its soak (the guard window when the soak is 0), later waves for the
        guard window when there is a guard. Rollbacks are not held up."""
        if self.kind != RolloutKind.ROLLOUT:
            return 0.0
        guard_s = self.guard_window_s if self.has_guard else 0.0
        if self.is_canary_wave(wave):
            return self.canary_soak_s or guard_s
        return guard_s

    @property
    def guard_coverage(self) -> str:
        """What the SLO guard stood on, for the page, the list and the end reason: "guarded by
        N requests", "unguarded", or "" for a rollback (never guarded: it must not be held up
        by the regression it undoes)."""
        if self.kind != RolloutKind.ROLLOUT:
            return ""
        if not self.has_guard:
            return "unguarded (no SLO guard)"
        judged = f"guarded by {self.guarded_requests} requests" if self.guarded_requests else ""
        if self.unguarded_waves:
            waves = f"{self.unguarded_waves} wave(s) unguarded"
            return f"{judged}; {waves}" if judged else f"unguarded ({waves})"
        if judged:
            return judged
        return "not judged yet" if self.is_active else "unguarded (no wave was judged)"

    @property
    def target_label(self) -> str:
        parts = [v.label for v in (self.tier_config, self.launch_profile) if v is not None]
        return " + ".join(parts) if parts else "previous versions"

    def audit_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "rollback_of": self.rollback_of_id,
            "tier_config": self.tier_config_id,
            "launch_profile": self.launch_profile_id,
            "node_selection": self.node_selection,
            "label": self.label,
            "canary_count": self.canary_count,
            "wave_size": self.wave_size,
            "convergence_timeout_s": self.convergence_timeout_s,
            "guard_max_ttft_p99_regression_pct": self.guard_max_ttft_p99_regression_pct,
            "guard_max_error_rate": self.guard_max_error_rate,
            "guard_window_s": self.guard_window_s,
            "guard_when_quiet": self.guard_when_quiet,
            "guard_probe_s": self.guard_probe_s,
            "canary_soak_s": self.canary_soak_s,
            "stale_targets": self.stale_targets,
            "excluded_nodes": self.excluded_nodes,
            "state": self.state,
            "reason": self.reason,
        }


class RolloutNode(models.Model):
    rollout = models.ForeignKey(Rollout, on_delete=models.CASCADE, related_name="nodes")
    node = models.ForeignKey("fleet.Node", on_delete=models.CASCADE, related_name="rollout_parts")
    wave = models.PositiveIntegerField()
    position = models.PositiveIntegerField(help_text="Order within the rollout")
    target_tier_config = models.ForeignKey("tuning.TierConfigVersion", **_VERSION_FK)
    target_launch_profile = models.ForeignKey("tuning.LaunchProfileVersion", **_VERSION_FK)
    # What the node desired (None: nothing) and ran just before this rollout set it, for the
    # kinds it targets: a rollback restores exactly that (plan.restore). Written in the same
    # transaction as the change.
    prev_tier_config = models.ForeignKey("tuning.TierConfigVersion", **_VERSION_FK)
    prev_launch_profile = models.ForeignKey("tuning.LaunchProfileVersion", **_VERSION_FK)
    prev_applied_tier_config = models.ForeignKey("tuning.TierConfigVersion", **_VERSION_FK)
    prev_applied_launch_profile = models.ForeignKey("tuning.LaunchProfileVersion", **_VERSION_FK)
    # Rollbacks only: end with no desired version of this kind (after the target, if any, is
    # applied and healthy, so the node runs what it ran before and then desires nothing).
    unset_tier_config = models.BooleanField(default=False)
    unset_launch_profile = models.BooleanField(default=False)

    state = models.CharField(max_length=15, choices=NodeState.choices, default=NodeState.PENDING)
    error = models.TextField(blank=True, help_text="The agent's or engine's error, or the timeout")
    applying_at = models.DateTimeField(null=True, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    healthy_at = models.DateTimeField(null=True, blank=True)
    reverted_at = models.DateTimeField(
        null=True, blank=True, help_text="When its previous versions were set back"
    )

    class Meta:
        ordering = ["rollout", "position"]
        constraints = [
            models.UniqueConstraint(fields=["rollout", "node"], name="tuning_rolloutnode_once"),
        ]

    def __str__(self) -> str:
        return f"{self.rollout_id}/{self.node_id}"

    @property
    def touched(self) -> bool:
        return self.applying_at is not None


class RolloutEvent(models.Model):
    rollout = models.ForeignKey(Rollout, on_delete=models.CASCADE, related_name="events")
    ts = models.DateTimeField()
    level = models.CharField(max_length=10, choices=EventLevel.choices, default=EventLevel.INFO)
    node = models.ForeignKey(
        "fleet.Node", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    message = models.TextField()

    class Meta:
        ordering = ["rollout", "ts", "id"]

    def __str__(self) -> str:
        return f"{self.ts.isoformat()} {self.message[:60]}"


def event(
    rollout: Rollout | int,
    message: str,
    *,
    level: str = EventLevel.INFO,
    node: Any = None,
    now: datetime | None = None,
) -> RolloutEvent:
    from django.utils import timezone

    rollout_id = rollout if isinstance(rollout, int) else rollout.pk
    return RolloutEvent.objects.create(
        rollout_id=rollout_id,
        ts=now or timezone.now(),
        level=level,
        message=message,
        node_id=getattr(node, "pk", node),
    )
