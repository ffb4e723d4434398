"""Choices of the bench app: one source of truth for every enumerated value."""

from __future__ import annotations

from django.db import models


class RunStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


# A run in one of these states will not change again.
FINISHED = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)


class Preset(models.TextChoices):
    CUSTOM = "custom", "Custom"
    SMOKE = "smoke", "Quick smoke test"
    MIXED_TIERS = "mixed-tiers", "Mixed tiers 70/20/10 (seed 000)"
    STEP_LADDER = "step-ladder", "Step ladder 32/128/256 (seed 003)"
    SEED003_SETTINGS = "seed003-settings", "Imported settings.json (seed 003)"


class Verdict(models.TextChoices):
    BETTER = "better", "better"
    WORSE = "worse", "worse"
    NO_CLEAR_CHANGE = "no clear change", "no clear change"
    NOT_ENOUGH_DATA = "not enough data", "not enough data"
