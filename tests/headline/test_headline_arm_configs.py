"""The headline's arms (console/bench/headline/catalog.py): (a) FCFS, (b) the engine's priority
alone, (c) and (d) the gateway with seed 000's tier config in front of either policy, and no
other letter but the search's (e); what each arm's client sends."""

from __future__ import annotations

import argparse

from console.bench.headline.catalog import arm_keys, standard_arms
from console.bench.headline.options import add_experiment_arguments, add_vllm_arguments, check
from console.bench.headline.procs import GATEWAY_KEY
from console.bench.headline.workload import SEED_TIER_CONFIG, TIER_PRIORITY, engine_flags
from scheduler import parse_config

SHARED = {"prompts_file": "p.jsonl", "rate": 4.0, "duration_s": 2.0, "warmup_s": 0.5, "seed": 1}


def test_the_arms_are_fcfs_priority_and_the_seed_config_in_front_of_each() -> None:
    arms = {arm.key: arm for arm in standard_arms()}
    assert list(arms) == ["a", "b", "c", "d"] and arm_keys() == "abcde"
    assert {k: (a.policy, a.via_gateway, a.send_priority) for k, a in arms.items()} == {
        "a": ("fcfs", False, False),
        "b": ("priority", False, True),
        "c": ("fcfs", True, False),
        "d": ("priority", True, False),
    }
    flags = engine_flags("priority", 1.0, 0)
    for key in "cd":
        assert arms[key].gateway_config(flags) == SEED_TIER_CONFIG
        parse_config(arms[key].tier_config)
    assert len({arm.name for arm in arms.values()}) == 4  # files and run labels stay apart


def test_each_arms_client_sends_the_key_or_the_priorities_it_needs() -> None:
    arms = {arm.key: arm for arm in standard_arms()}
    a, b, d = (arms[k].spec("http://127.0.0.1:9", **SHARED) for k in "abd")
    assert (a.api_key, a.tier_priority) == (None, {})
    assert (b.api_key, b.tier_priority) == (None, TIER_PRIORITY)
    assert (d.api_key, d.tier_priority) == (GATEWAY_KEY, {})  # the gateway sets priority
    assert d.base_url == "http://127.0.0.1:9/v1" and d.rate == 4.0
    assert arms["b"].record() == {
        "key": "b", "name": "direct-priority", "title": arms["b"].title,
        "engine_policy": "priority", "via_gateway": False, "client_sends_priority": True,
    }  # fmt: skip


def test_arm_letters_that_name_no_arm_are_refused() -> None:
    parser = argparse.ArgumentParser()
    add_experiment_arguments(parser)
    add_vllm_arguments(parser)
    assert check(parser.parse_args(["--arms", "bd"])) is None
    assert check(parser.parse_args([])) is None  # the default: abcde
    for arms in ("bi", "", "b-d", "bdr"):
        problem = check(parser.parse_args(["--arms", arms]))
        assert problem is not None and "--arms" in problem and "abcde" in problem
