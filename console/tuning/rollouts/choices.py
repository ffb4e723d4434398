"""Choices of rollouts: one source of truth for every enumerated value."""

from __future__ import annotations

from django.db import models


class RolloutKind(models.TextChoices):
    ROLLOUT = "rollout", "Rollout"
    # Sets the versions nodes had before, as a rollout of its own. It never undoes itself on
    # failure: undoing a rollback would re-apply the change being rolled back.
    ROLLBACK = "rollback", "Rollback"


class RolloutState(models.TextChoices):
    PENDING = "pending", "pending"
    RUNNING = "running", "running"
    # The SLO guard could not judge a wave (too few requests, no probe possible or wanted):
    # waiting for an operator to resume (the wave goes on unguarded) or abort (rolled back).
    PAUSED = "paused", "paused"
    ROLLING_BACK = "rolling_back", "rolling back"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"
    ROLLED_BACK = "rolled_back", "rolled back"
    ABORTED = "aborted", "aborted"


ACTIVE_STATES = (
    RolloutState.PENDING,
    RolloutState.RUNNING,
    RolloutState.PAUSED,
    RolloutState.ROLLING_BACK,
)
FINAL_STATES = (
    RolloutState.SUCCEEDED,
    RolloutState.FAILED,
    RolloutState.ROLLED_BACK,
    RolloutState.ABORTED,
)


class GuardWhenQuiet(models.TextChoices):
    """What a guarded wave does when its own traffic is too thin for the SLO guard to judge."""

    PROBE = "probe", "probe it with load of its own"
    PAUSE = "pause", "pause and ask"


class NodeState(models.TextChoices):
    PENDING = "pending", "pending"
    APPLYING = "applying", "applying"
    APPLIED = "applied", "applied"
    HEALTHY = "healthy", "healthy"
    FAILED = "failed", "failed"
    ROLLED_BACK = "rolled_back", "rolled back"


# Nodes whose desired versions this rollout has set (and must set back on a rollback).
TOUCHED_STATES = (NodeState.APPLYING, NodeState.APPLIED, NodeState.HEALTHY, NodeState.FAILED)


class NodeSelection(models.TextChoices):
    ALL = "all", "all nodes"
    NODES = "nodes", "a selection"
    LABEL = "label", "nodes with a label"


class StaleTargets(models.TextChoices):
    """Targets whose agent is stale or was never seen: they would only time the rollout out."""

    EXCLUDE = "exclude", "leave them out"
    REFUSE = "refuse", "refuse to start"
    INCLUDE = "include", "include them anyway"


class EventLevel(models.TextChoices):
    INFO = "info", "info"
    WARNING = "warning", "warning"
    ERROR = "error", "error"
