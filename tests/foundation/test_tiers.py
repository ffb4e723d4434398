"""Tier order and defaults come from the tier config, not from names written in the code."""

from __future__ import annotations

from console.core.tiers import SEED_TIERS, TIER_COLOURS, tier_sort_key
from console.tuning.rollouts.guard import default_tier
from scheduler import default_config, parse_config


def test_the_display_order_is_the_seeds_urgency_then_names_then_overall() -> None:
    names = ["overall", "zeta", "offline", "alpha", "batch", "online"]
    assert sorted(names, key=tier_sort_key) == [
        "online",
        "batch",
        "offline",
        "alpha",
        "zeta",
        "overall",
    ]
    assert default_config().tiers_by_urgency() == SEED_TIERS
    assert set(SEED_TIERS) <= set(TIER_COLOURS)


def test_the_guards_default_tier_is_the_most_urgent_of_the_config() -> None:
    assert default_tier() == "online"
    queue = {"max_batch_size": 1, "max_waiting_time_ms": 1, "max_tokens_per_batch": 1}
    config = parse_config(
        {
            "scheduler": {
                "queues": {"bulk": {**queue, "priority": 5}, "chat": {**queue, "priority": 2}}
            }
        }
    )
    assert default_tier(config) == "chat"
