"""Celery tasks of sweeps (h19exec writes them; this stub only keeps the shape)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from console.bench.sweeps.models import Sweep


def enqueue(sweep: Sweep) -> None:
    """Queue the sweep's execution (called after the creating transaction commits)."""
    return None
