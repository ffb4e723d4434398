"""Choices of sweeps: one source of truth for every enumerated value."""

from __future__ import annotations

from django.db import models


class SweepKind(models.TextChoices):
    """What the sweep varies: the base version's kind."""

    TIER_CONFIG = "tier_config", "Tier config (hot-applied)"
    LAUNCH_PROFILE = "launch_profile", "Launch profile (engine restart)"


class SweepMode(models.TextChoices):
    ONE = "one", "One variable"
    GRID = "grid", "Grid (2-3 variables)"
    # One variable at a time, keeping the best feasible value of each before the next.
    COORDINATE = "coordinate", "Coordinate descent"


class SweepStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


# A sweep in one of these states will not change again (but for adoption).
FINISHED = (SweepStatus.SUCCEEDED, SweepStatus.FAILED, SweepStatus.CANCELLED)
ACTIVE = (SweepStatus.PENDING, SweepStatus.RUNNING)


class TrialStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    SKIPPED = "skipped", "Skipped"


TRIAL_FINISHED = (
    TrialStatus.SUCCEEDED,
    TrialStatus.FAILED,
    TrialStatus.CANCELLED,
    TrialStatus.SKIPPED,
)


class Objective(models.TextChoices):
    MIN_ONLINE_TTFT_P99 = "min_online_ttft_p99", "Lowest online TTFT P99"
    MAX_THROUGHPUT = "max_throughput", "Highest request throughput (req/s)"
    MAX_OUTPUT_TOKENS = "max_output_tokens_per_s", "Highest output tokens/s"
