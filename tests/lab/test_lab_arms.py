"""The lab's headline arms (lab/headline/arms.py): each tier config parses, and each arm is the
product's (b) or (d) with the one thing it tests changed: the paired arms (h) and (s) are (d)
with the recovery reserve, or the starvation bound, off; the reserve arms keep some of the
engine's sequences; (z) sends the lower tiers' streams in fewer pieces."""

from __future__ import annotations

from typing import Any

import pytest

from console.bench.headline.workload import engine_flags
from gpu_agent import config as agent_config
from lab.headline.__main__ import build_parser, check_lab
from lab.headline.arms import engine_sequences, lab_arms, lower_tier_fields
from scheduler import parse_config


def _arms() -> dict[str, Any]:
    """The lab's arms and the product's (a)-(d) they are compared with, by key."""
    return {arm.key: arm for arm in lab_arms()}


def test_every_gateway_arm_config_parses() -> None:
    arms = [arm for arm in lab_arms() if arm.tier_config is not None]
    assert arms
    for arm in arms:
        parse_config(arm.tier_config)


@pytest.mark.parametrize(
    ("key", "field", "in_d", "in_arm"),
    [("h", "recovery_reserve", 0.5, 0), ("s", "min_share", 0.01, 0)],
)
def test_a_paired_arm_is_arm_d_with_one_admission_field_off(
    key: str, field: str, in_d: float, in_arm: float
) -> None:
    arms = _arms()
    d, paired = arms["d"], arms[key]
    assert d.tier_config is not None and paired.tier_config is not None
    assert getattr(parse_config(d.tier_config).scheduler.admission, field) == in_d
    assert getattr(parse_config(paired.tier_config).scheduler.admission, field) == in_arm
    without = {**paired.tier_config["scheduler"], "admission": {}}
    assert without == {**d.tier_config["scheduler"], "admission": {}}
    assert paired.tier_config["scheduler"]["admission"] == {field: in_arm}
    assert paired.policy == d.policy == "priority"


@pytest.mark.parametrize(("key", "field", "value"), [("z", "stream_interval_tokens", 16)])
def test_arm_z_is_arm_d_with_the_lower_tiers_streams_in_fewer_pieces(
    key: str, field: str, value: int
) -> None:
    arms = _arms()
    d, t = arms["d"], arms[key]
    assert d.tier_config is not None and t.tier_config is not None
    queues = parse_config(t.tier_config).scheduler.queues
    assert {name: getattr(q, field) for name, q in queues.items()} == {
        "online": None, "batch": value, "offline": value}  # fmt: skip
    for name in queues:
        without = {**t.tier_config["scheduler"]["queues"][name]}
        without.pop(field, None)
        assert without == d.tier_config["scheduler"]["queues"][name]
    assert {**t.tier_config["scheduler"], "queues": {}} == {
        **d.tier_config["scheduler"],
        "queues": {},
    }
    assert t.policy == d.policy == "priority" and not t.reserve_sequences


def test_arm_o_is_arm_b_with_the_clients_asking_for_arm_zs_pieces() -> None:
    """(o) runs what (b) runs, its batch and offline streams asked for (z)'s 16 tokens a piece
    by the client itself: the interval without a gateway."""
    arms = _arms()
    b, o, z = arms["b"], arms["o"], arms["z"]
    assert (o.policy, o.tier_config, o.send_priority) == (b.policy, None, True)
    assert z.tier_config is not None
    queues = parse_config(z.tier_config).scheduler.queues
    asked = {
        name: q.stream_interval_tokens for name, q in queues.items() if q.stream_interval_tokens
    }
    assert lower_tier_fields(o.send_interval) == asked == {"batch": 16, "offline": 16}
    spec = o.spec("http://x", prompts_file="p.jsonl", rate=1.0, duration_s=1.0, warmup_s=0.0,
                  seed=1)  # fmt: skip
    assert spec.tier_stream_interval == asked and spec.tier_priority
    assert o.record()["client_stream_interval"] == 16
    assert not b.spec("http://x", prompts_file="p.jsonl", rate=1.0, duration_s=1.0,
                      warmup_s=0.0, seed=1).tier_stream_interval  # fmt: skip


def test_arm_i_is_arm_b_again() -> None:
    """The A/A arm runs exactly what (b) runs: straight to the engine, priority per tier."""
    arms = _arms()
    b, i = arms["b"], arms["i"]
    assert (i.policy, i.tier_config, i.send_priority) == (b.policy, b.tier_config, True)
    assert i.name != b.name  # its files and run labels stay apart


def test_arm_letters_that_name_no_arm_are_refused() -> None:
    parser = build_parser()
    assert check_lab(parser.parse_args(["--arms", "bi"])) is None
    for arms in ("bj", "", "b-d"):
        problem = check_lab(parser.parse_args(["--arms", arms]))
        assert problem is not None and "--arms" in problem and "abcdefghi" in problem


@pytest.mark.parametrize(
    ("key", "reserved", "follows"), [("k", 1, False), ("n", 3, False), ("m", 6, False),
                                     ("q", 6, True), ("w", 3, True), ("y", 1, True)]
)  # fmt: skip
@pytest.mark.parametrize(("engine", "sequences"), [("sim", 32), ("vllm", 16)])
def test_reserve_arms_are_arm_d_with_some_of_the_engines_sequences_reserved(
    key: str, reserved: int, follows: bool, engine: str, sequences: int
) -> None:
    """(k), (n) and (m) cap the gateway at the engine's own `--max-num-seqs`, as the agent does
    from a launch profile, and keep the last 1, 3 or 6 of them for the most urgent tier; (q)
    is (m) with that reserve following online's arrivals, (w) is (q) with 3 and (y) with 1;
    nothing else differs from (d)."""
    arms = _arms()
    d, arm = arms["d"], arms[key]
    flags = engine_flags("priority", 1.0, 0, engine)
    config = arm.gateway_config(flags)
    assert config is not None and d.gateway_config(flags) == d.tier_config
    admission = parse_config(config).scheduler.admission
    assert (admission.max_in_flight, admission.reserved_slots) == (sequences, reserved)
    assert admission.reserve_follows_arrivals is follows
    assert config["scheduler"]["admission"] == {
        "max_in_flight": sequences,
        "reserved_slots": reserved,
        **({"reserve_follows_arrivals": True} if follows else {}),
    }
    assert {**config["scheduler"], "admission": {}} == {
        **d.tier_config["scheduler"],
        "admission": {},
    }
    assert arm.policy == d.policy == "priority"
    assert f"reserved_slots {reserved}" in arm.title


def test_the_engine_sequences_come_from_its_flags() -> None:
    assert engine_sequences(["--max-num-seqs", "8", "--enable-prefix-caching"]) == 8
    assert engine_sequences(["--enable-prefix-caching"]) == 256  # the agent's default


def test_arm_x_is_w_with_the_agent_leaving_the_engines_helpers_where_they_are() -> None:
    """(x): the same tier config as (w), and the agent told --no-fence-engine-helpers, a flag
    the agent reads as that; every other arm's agent keeps its defaults."""
    arms = _arms()
    flags = engine_flags("priority", 1.0, 0, "vllm")
    assert arms["x"].gateway_config(flags) == arms["w"].gateway_config(flags)
    assert arms["x"].gateway_flags == ("--no-fence-engine-helpers",)
    assert [k for k, arm in arms.items() if getattr(arm, "gateway_flags", ())] == ["x"]
    base = ["--engine-url", "http://127.0.0.1:8000", "--listen", "127.0.0.1:9100"]
    base += ["--tier-config", "t.json", "--keys", "k"]
    assert agent_config.parse_args([*base, *arms["x"].gateway_flags]).fence_engine_helpers is False
    assert agent_config.parse_args(base).fence_engine_helpers is True
