"""Helpers shared by the scheduler tests (a uniquely named module: other areas have conftests)."""

from __future__ import annotations

import copy
from typing import Any

from scheduler import TierConfig, parse_config

SEED: dict[str, Any] = {
    "scheduler": {
        "queues": {
            "online": {
                "max_batch_size": 8,
                "max_waiting_time_ms": 10,
                "max_tokens_per_batch": 4096,
                "priority": 1,
            },
            "batch": {
                "max_batch_size": 32,
                "max_waiting_time_ms": 50,
                "max_tokens_per_batch": 16384,
                "priority": 2,
            },
            "offline": {
                "max_batch_size": 64,
                "max_waiting_time_ms": 200,
                "max_tokens_per_batch": 32768,
                "priority": 3,
            },
        },
        "adaptive": {
            "enabled": True,
            "online_pressure_threshold": 10,
            "wait_time_reduction_ratio": 0.5,
        },
    }
}


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
