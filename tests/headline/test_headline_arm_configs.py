"""The headline arms' tier configs (console/bench/headline/arms.py): each parses, and the
paired arm (h) is arm (d) with the recovery reserve off and nothing else changed."""

from __future__ import annotations

from console.bench.headline.arms import standard_arms
from console.bench.headline.options import check
from gpu_agent.config import parse_args
from perf.headline.__main__ import build_parser
from scheduler import parse_config


def test_every_gateway_arm_config_parses() -> None:
    arms = [arm for arm in standard_arms() if arm.tier_config is not None]
    assert arms
    for arm in arms:
        parse_config(arm.tier_config)


def test_arm_h_is_arm_d_without_the_recovery_reserve() -> None:
    arms = {arm.key: arm for arm in standard_arms()}
    d, h = arms["d"], arms["h"]
    assert d.tier_config is not None and h.tier_config is not None
    assert parse_config(d.tier_config).scheduler.admission.recovery_reserve == 0.5
    assert parse_config(h.tier_config).scheduler.admission.recovery_reserve == 0
    without = {**h.tier_config["scheduler"], "admission": {}}
    assert without == {**d.tier_config["scheduler"], "admission": {}}
    assert h.policy == d.policy == "priority"


def test_arm_i_is_arm_b_again() -> None:
    """The A/A arm runs exactly what (b) runs: straight to the engine, priority per tier."""
    arms = {arm.key: arm for arm in standard_arms()}
    b, i = arms["b"], arms["i"]
    assert (i.policy, i.tier_config, i.send_priority) == (b.policy, b.tier_config, True)
    assert i.name != b.name  # its files and run labels stay apart


def test_arm_j_is_arm_d_with_the_agent_under_sched_batch() -> None:
    """(j) runs (d)'s engine and tier config; only the agent's CPU policy differs, and the
    gateway process the arm starts is given it."""
    arms = {arm.key: arm for arm in standard_arms()}
    d, j = arms["d"], arms["j"]
    assert (j.policy, j.tier_config, j.send_priority) == (d.policy, d.tier_config, False)
    assert d.gateway_args == () and j.gateway_args == ("--cpu-policy", "batch")
    assert parse_args(
        ["--engine-url", "http://127.0.0.1:1", "--listen", "127.0.0.1:1",
         "--tier-config", "t", "--keys", "k", *j.gateway_args]
    ).cpu_policy == "batch"  # fmt: skip


def test_arm_letters_that_name_no_arm_are_refused() -> None:
    parser = build_parser()
    assert check(parser.parse_args(["--arms", "bi"])) is None
    for arms in ("bz", "", "b-d"):
        problem = check(parser.parse_args(["--arms", arms]))
        assert problem is not None and "--arms" in problem and "abcdefghij" in problem
