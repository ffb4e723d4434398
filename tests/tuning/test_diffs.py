"""Structured diffs: tier configs through the scheduler's schema, launch args leaf by leaf."""

from __future__ import annotations

import copy
from typing import Any

from console.tuning.diffs import DiffRow, dict_diff, launch_args_diff, tier_config_diff


def test_a_tier_config_diff_names_each_changed_leaf(seed_tiers: dict[str, Any]) -> None:
    new = copy.deepcopy(seed_tiers)
    new["scheduler"]["queues"]["online"]["max_waiting_time_ms"] = 5
    new["scheduler"]["adaptive"]["online_pressure_threshold"] = 5
    del new["scheduler"]["queues"]["offline"]
    rows = tier_config_diff(seed_tiers, new)
    by_path = {r.path: r for r in rows}
    assert by_path["scheduler.queues.online.max_waiting_time_ms"] == DiffRow(
        "scheduler.queues.online.max_waiting_time_ms", 10, 5, "changed"
    )
    assert by_path["scheduler.adaptive.online_pressure_threshold"].kind == "changed"
    assert by_path["scheduler.queues.offline"].kind == "removed"
    assert by_path["scheduler.queues.offline"].old["priority"] == 3
    assert len(rows) == 3


def test_writing_a_default_explicitly_is_not_a_tier_config_change(
    seed_tiers: dict[str, Any],
) -> None:
    new = copy.deepcopy(seed_tiers)
    new["scheduler"]["adaptive"]["tier"] = "online"  # the default
    new["scheduler"]["queues"]["online"]["max_waiting_time_ms"] = 10.0
    assert tier_config_diff(seed_tiers, new) == []


def test_a_config_that_no_longer_parses_is_still_compared_as_json(
    seed_tiers: dict[str, Any],
) -> None:
    old = {"scheduler": {"queues": {}, "legacy": 1}}
    rows = tier_config_diff(old, seed_tiers)
    assert {r.path for r in rows} >= {"scheduler.legacy", "scheduler.queues.online"}


def test_launch_args_diff_shows_added_removed_and_changed() -> None:
    rows = launch_args_diff(
        {
            "model": "m",
            "max_num_seqs": 32,
            "enable_prefix_caching": True,
            "extra_args": ["--seed", "1"],
        },
        {"model": "m", "max_num_seqs": 64, "port": 8001, "extra_args": ["--seed", "2"]},
    )
    assert [(r.path, r.old, r.new, r.kind) for r in rows] == [
        ("max_num_seqs", 32, 64, "changed"),
        ("enable_prefix_caching", True, None, "removed"),
        ("extra_args", ["--seed", "1"], ["--seed", "2"], "changed"),
        ("port", None, 8001, "added"),
    ]


def test_a_boolean_is_not_the_same_as_one() -> None:
    assert dict_diff({"a": True}, {"a": 1}) == [DiffRow("a", True, 1, "changed")]
    assert dict_diff({"a": 1}, {"a": 1.0}) == []
