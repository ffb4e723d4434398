"""Helpers shared by the scheduler tests (a uniquely named module: other areas have conftests)."""

from __future__ import annotations

import copy
from typing import Any

from scheduler import TierConfig, parse_config
from tests.seed import seed_tiers

SEED: dict[str, Any] = seed_tiers()


def seed_dict() -> dict[str, Any]:
    return copy.deepcopy(SEED)


def make_config(
    queues: dict[str, dict[str, Any]] | None = None,
    adaptive: dict[str, Any] | None = None,
    admission: dict[str, Any] | None = None,
    drop: tuple[str, ...] = (),
) -> TierConfig:
    """The seed with per-queue and block overrides merged in (and some queues dropped)."""
    doc = seed_dict()
    sched = doc["scheduler"]
    for name, fields in (queues or {}).items():
        sched["queues"].setdefault(name, {}).update(fields)
    for name in drop:
        del sched["queues"][name]
    if adaptive:
        sched["adaptive"].update(adaptive)
    if admission:
        sched["admission"] = dict(admission)
    return parse_config(doc)
