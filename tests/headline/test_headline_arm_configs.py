"""The headline arms' tier configs (console/bench/headline/arms.py): each parses, and the
paired arm (h) is arm (d) with the recovery reserve off and nothing else changed."""

from __future__ import annotations

from console.bench.headline.arms import standard_arms
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
