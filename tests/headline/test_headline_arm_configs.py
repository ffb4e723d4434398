"""The headline arms' tier configs (console/bench/headline/arms.py): each parses, and the
paired arms (h) and (s) are arm (d) with the recovery reserve, or the starvation bound, off
and nothing else changed."""

from __future__ import annotations

from console.bench.headline.arms import standard_arms
from console.bench.headline.options import check
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


def test_arm_s_is_arm_d_without_the_starvation_bound() -> None:
    arms = {arm.key: arm for arm in standard_arms()}
    d, s = arms["d"], arms["s"]
    assert d.tier_config is not None and s.tier_config is not None
    assert parse_config(d.tier_config).scheduler.admission.min_share == 0.01
    assert parse_config(s.tier_config).scheduler.admission.min_share == 0
    without = {**s.tier_config["scheduler"], "admission": {}}
    assert without == {**d.tier_config["scheduler"], "admission": {}}
    assert s.policy == d.policy == "priority"


def test_arm_i_is_arm_b_again() -> None:
    """The A/A arm runs exactly what (b) runs: straight to the engine, priority per tier."""
    arms = {arm.key: arm for arm in standard_arms()}
    b, i = arms["b"], arms["i"]
    assert (i.policy, i.tier_config, i.send_priority) == (b.policy, b.tier_config, True)
    assert i.name != b.name  # its files and run labels stay apart


def test_arm_letters_that_name_no_arm_are_refused() -> None:
    parser = build_parser()
    assert check(parser.parse_args(["--arms", "bi"])) is None
    for arms in ("bz", "", "b-d"):
        problem = check(parser.parse_args(["--arms", arms]))
        assert problem is not None and "--arms" in problem and "abcdefghi" in problem
