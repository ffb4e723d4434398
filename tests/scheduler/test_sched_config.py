from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scheduler import (
    Change,
    ConfigError,
    config_to_dict,
    default_config,
    diff_configs,
    load_config_file,
    parse_config,
)
from tests.scheduler.sched_helpers import make_config, seed_dict


def errors_of(doc: Any, **kwargs: Any) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(doc, **kwargs)
    return [str(e) for e in info.value.errors]


def test_seed_parses_verbatim_and_round_trips_identically(seed: dict[str, Any]) -> None:
    cfg = parse_config(seed)
    assert json.dumps(config_to_dict(cfg)) == json.dumps(seed)
    assert cfg.scheduler.queues["online"].max_queue_depth is None
    assert cfg.scheduler.adaptive.tier == "online"
    assert cfg.scheduler.admission.max_in_flight is None
    assert cfg.scheduler.admission.max_awaiting_first_token is None  # adapted
    assert cfg.scheduler.admission.reserved_slots == 0
    assert cfg.scheduler.admission.pass_priority is True
    assert cfg.scheduler.admission.min_share == 0.01


def test_default_config_is_the_seed(seed: dict[str, Any]) -> None:
    assert config_to_dict(default_config()) == seed
    assert default_config().tiers_by_urgency() == ["online", "batch", "offline"]


def test_extensions_round_trip(seed: dict[str, Any]) -> None:
    seed["scheduler"]["queues"]["online"].update(
        {"max_queue_depth": 100, "queue_timeout_ms": 2500.5, "length_groups": [512, 2048]}
    )
    seed["scheduler"]["queues"]["batch"]["stream_interval_tokens"] = 16
    seed["scheduler"]["adaptive"]["tier"] = "batch"
    seed["scheduler"]["admission"] = {
        "max_in_flight": 64,
        "reserved_slots": 8,
        "reserve_follows_arrivals": True,
        "pass_priority": False,
    }
    assert config_to_dict(parse_config(seed)) == seed


@pytest.mark.parametrize("name", ["reserve_follows_arrivals"])
def test_the_standing_reserves_options_are_off_by_default_and_strict_booleans(
    seed: dict[str, Any], name: str
) -> None:
    assert getattr(parse_config(seed).scheduler.admission, name) is False
    seed["scheduler"]["admission"] = {name: "yes"}
    errors = errors_of(seed)
    assert len(errors) == 1 and errors[0].startswith(f"scheduler.admission.{name}:"), errors


def test_bad_tiers_reports_every_rule_at_once() -> None:
    doc = seed_dict()
    queues = doc["scheduler"]["queues"]
    queues["batch"].update({"max_batch_size": -4, "priority": 1})
    doc["scheduler"]["adaptive"]["wait_time_reduction_ratio"] = 1.5
    assert errors_of(doc) == [
        "scheduler.queues.batch.max_batch_size: must be > 0",
        "scheduler.queues.batch.priority: must differ from queues.online.priority",
        "scheduler.adaptive.wait_time_reduction_ratio: must be in (0, 1]",
    ]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_batch_size", 0, "must be > 0"),
        ("max_tokens_per_batch", -1, "must be > 0"),
        ("max_waiting_time_ms", 0, "must be > 0"),
        ("max_waiting_time_ms", "10", "must be a number"),
        ("max_batch_size", "8", "must be an integer"),
        ("max_batch_size", True, "must be an integer"),
        ("max_batch_size", 8.5, "must be an integer"),
        ("max_queue_depth", 0, "must be > 0"),
        ("queue_timeout_ms", -5, "must be > 0"),
        ("length_groups", [2048, 512], "must be strictly increasing"),
        ("length_groups", [0], "must be > 0"),
        ("stream_interval_tokens", 0, "must be >= 1"),
        ("stream_interval_tokens", 1025, "must be <= 1024"),
        ("stream_interval_tokens", 2.5, "must be an integer"),
        ("colour", "red", "unknown field"),
    ],
)
def test_queue_field_rules(seed: dict[str, Any], field: str, value: Any, message: str) -> None:
    seed["scheduler"]["queues"]["batch"][field] = value
    errors = errors_of(seed)
    assert any(
        e.startswith(f"scheduler.queues.batch.{field}") and e.endswith(message) for e in errors
    ), errors


@pytest.mark.parametrize("ratio", [0, -0.5, 1.0001, 2])
def test_ratio_outside_zero_one_is_refused(seed: dict[str, Any], ratio: float) -> None:
    seed["scheduler"]["adaptive"]["wait_time_reduction_ratio"] = ratio
    assert errors_of(seed) == ["scheduler.adaptive.wait_time_reduction_ratio: must be in (0, 1]"]


def test_ratio_of_exactly_one_is_allowed(seed: dict[str, Any]) -> None:
    seed["scheduler"]["adaptive"]["wait_time_reduction_ratio"] = 1
    assert parse_config(seed).scheduler.adaptive.wait_time_reduction_ratio == 1


def test_adaptive_tier_must_exist(seed: dict[str, Any]) -> None:
    seed["scheduler"]["adaptive"]["tier"] = "gold"
    [error] = errors_of(seed)
    assert error.startswith("scheduler.adaptive.tier: must name a queue")


def test_adaptive_default_tier_must_exist_when_online_is_absent(seed: dict[str, Any]) -> None:
    del seed["scheduler"]["queues"]["online"]
    assert errors_of(seed)[0].startswith("scheduler.adaptive.tier")


def test_reserved_slots_must_be_below_max_in_flight(seed: dict[str, Any]) -> None:
    seed["scheduler"]["admission"] = {"max_in_flight": 8, "reserved_slots": 8}
    assert errors_of(seed) == [
        "scheduler.admission.reserved_slots: must be below max_in_flight (8)"
    ]
    seed["scheduler"]["admission"] = {"reserved_slots": 8}
    parse_config(seed)  # no cap known: nothing to compare with
    assert errors_of(seed, default_max_in_flight=4)[0].startswith(
        "scheduler.admission.reserved_slots"
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-0.1, "must be >= 0"),
        (0.5, "must be below 1 / 2 (one share for each of the 2 less urgent queues)"),
        ("a lot", "must be a number"),
        (True, "must be a number"),
        (float("nan"), "must be a finite number"),
    ],
)
def test_min_share_is_checked_against_the_number_of_queues(
    seed: dict[str, Any], value: object, message: str
) -> None:
    seed["scheduler"]["admission"] = {"min_share": value}
    assert errors_of(seed) == [f"scheduler.admission.min_share: {message}"]


def test_min_share_zero_and_adapted_awaiting_are_valid(seed: dict[str, Any]) -> None:
    seed["scheduler"]["admission"] = {"min_share": 0, "max_awaiting_first_token": None}
    admission = parse_config(seed).scheduler.admission
    assert admission.min_share == 0 and admission.max_awaiting_first_token is None
    seed["scheduler"]["admission"] = {"max_awaiting_first_token": 0}
    assert errors_of(seed) == ["scheduler.admission.max_awaiting_first_token: must be > 0"]


def test_missing_and_mistyped_blocks(seed: dict[str, Any]) -> None:
    assert errors_of({}) == ["scheduler: required field is missing"]
    assert errors_of({"scheduler": {"queues": {}}}) == ["scheduler.queues: must not be empty"]
    del seed["scheduler"]["queues"]["online"]["priority"]
    seed["scheduler"]["adaptive"]["enabled"] = "yes"
    seed["scheduler"]["extra"] = 1
    assert errors_of(seed) == [
        "scheduler.queues.online.priority: required field is missing",
        "scheduler.adaptive.enabled: must be true or false",
        "scheduler.extra: unknown field",
    ]


def test_config_error_str_is_one_line_per_error(seed: dict[str, Any]) -> None:
    seed["scheduler"]["queues"]["batch"]["priority"] = 1
    seed["scheduler"]["queues"]["offline"]["priority"] = 1
    with pytest.raises(ConfigError) as info:
        parse_config(seed)
    assert str(info.value).splitlines() == [
        "scheduler.queues.batch.priority: must differ from queues.online.priority",
        "scheduler.queues.offline.priority: must differ from queues.online.priority",
    ]
    assert [e.path for e in info.value.errors] == [
        "scheduler.queues.batch.priority",
        "scheduler.queues.offline.priority",
    ]


def test_load_config_file_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"scheduler": {\n  "queues": ,\n}}')
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert "line 2 column 13" in str(info.value)
    path.write_text(json.dumps(seed_dict()))
    assert load_config_file(path) == default_config()


def test_diff_lists_leaf_changes_with_defaults_filled_in() -> None:
    old = default_config()
    new = make_config(
        queues={
            "batch": {"max_batch_size": 16},
            "gold": {
                "max_batch_size": 1,
                "max_waiting_time_ms": 1,
                "max_tokens_per_batch": 1,
                "priority": 0,
            },
        },
        admission={"reserved_slots": 2},
        drop=("offline",),
    )
    changes = diff_configs(old, new)
    paths = [c.path for c in changes]
    assert Change("scheduler.queues.batch.max_batch_size", 32, 16) in changes
    assert Change("scheduler.admission.reserved_slots", 0, 2) in changes
    assert "scheduler.queues.offline" in paths and "scheduler.queues.gold" in paths
    removed = next(c for c in changes if c.path == "scheduler.queues.offline")
    assert removed.new is None and removed.old["priority"] == 3
    assert diff_configs(old, old) == []
    # an explicit default is no change
    assert diff_configs(old, make_config(admission={"min_share": 0.01})) == []
    # a fixed awaiting cap where the old one adapted is a change
    fixed = make_config(admission={"max_awaiting_first_token": 4})
    assert diff_configs(old, fixed) == [
        Change("scheduler.admission.max_awaiting_first_token", None, 4)
    ]


@pytest.mark.parametrize("name", ["", "gold.tier", "a b", "x" * 65])
def test_queue_names_must_be_plain_words(seed: dict[str, Any], name: str) -> None:
    seed["scheduler"]["queues"][name] = dict(seed["scheduler"]["queues"]["offline"], priority=9)
    assert errors_of(seed) == [
        f"scheduler.queues.{name}: name must be 1-64 letters, digits, '-' or '_'"
    ]


def test_overload_and_age_bounds_default_and_validate(seed: dict[str, Any]) -> None:
    admission = parse_config(seed).scheduler.admission
    assert (admission.lifo_after_ms, admission.shed_after_ms) == (1000, 30000)
    seed["scheduler"]["queues"]["online"]["promote_after_ms"] = 100
    seed["scheduler"]["queues"]["batch"]["promote_after_ms"] = 0
    seed["scheduler"]["queues"]["offline"]["queue_timeout_ms"] = 500
    seed["scheduler"]["queues"]["offline"]["promote_after_ms"] = 500
    seed["scheduler"]["admission"] = {"lifo_after_ms": 2000, "shed_after_ms": 2000}
    assert errors_of(seed) == [
        "scheduler.queues.batch.promote_after_ms: must be > 0",
        "scheduler.admission.shed_after_ms: must be above lifo_after_ms (2000), or no backlog "
        "is ever served newest first",
        "scheduler.queues.online.promote_after_ms: the most urgent queue has no one to go ahead of",
        "scheduler.queues.offline.promote_after_ms: must be below queue_timeout_ms (500)",
    ]


def test_an_age_bound_must_come_before_the_default_sojourn_bound(seed: dict[str, Any]) -> None:
    seed["scheduler"]["queues"]["offline"]["promote_after_ms"] = 40000
    assert errors_of(seed) == [
        "scheduler.queues.offline.promote_after_ms: must be below admission.shed_after_ms (30000)"
    ]
    seed["scheduler"]["admission"] = {"shed_after_ms": None, "lifo_after_ms": None}
    assert parse_config(seed).scheduler.queues["offline"].promote_after_ms == 40000
