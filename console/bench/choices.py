"""Choices of the bench app: one source of truth for every enumerated value."""

from __future__ import annotations

from django.db import models


class RunStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    # Finished, but some requests failed (no more than outcomes.MAX_ERROR_SHARE of them).
    WITH_ERRORS = "with-errors", "Completed with errors"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


# A run in one of these states will not change again.
FINISHED = (RunStatus.SUCCEEDED, RunStatus.WITH_ERRORS, RunStatus.FAILED, RunStatus.CANCELLED)
# Finished with results worth comparing (a failed run may still hold some).
COMPARABLE = (RunStatus.SUCCEEDED, RunStatus.WITH_ERRORS)


class Side(models.TextChoices):
    """The side of a comparison a run of a series stands on."""

    A = "A", "A (before)"
    B = "B", "B (after)"


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
    MIXED = "mixed", "mixed"  # only as a tier's overall verdict: some better, some worse
    NOT_ENOUGH_DATA = "not enough data", "not enough data"
