"""The recovery reserve (issue 16, item 4; scheduler/reserve.py), fake clock: after the most
urgent tier was backed up, the less urgent tiers leave a share of the engine's sequences to it
for `recovery_hold_ms`, so that a new online request finds a sequence free instead of waiting
for a batch or offline stream to end; before that and after it, the release is
work-conserving."""

from __future__ import annotations

import math

import pytest

from scheduler import ConfigError, Dispatcher, Request, parse_config
from scheduler.rooms import OVERLOAD_CLEAR_S
from tests.scheduler.sched_helpers import make_config, seed_dict


def req(rid: str, tier: str = "online") -> Request:
    return Request(rid, tier, 100, 10)


def ids(reqs: list[Request]) -> list[str]:
    return [r.id for r in reqs]


def surge(d: Dispatcher, now: float) -> float:
    """Back online up: one online request queued for over `lifo_after_ms` (1 s) while every
    slot is held; then free the slots again. Returns the time after it."""
    holders = [f"h{i}" for i in range(16)]
    for rid in holders:
        d.arrive(req(rid), now)
    assert len(d.poll(now).released) == 16
    d.arrive(req("late"), now)
    out = ids(d.poll(now + 1.5).released)  # backed up: the reserve starts holding
    for rid in holders:
        d.complete(rid, now + 1.5)
    out += ids(d.poll(now + 1.5).released)
    assert out == ["late"]
    d.complete("late", now + 1.5)
    return now + 1.5


def seed_dispatcher(**admission: object) -> Dispatcher:
    # A fixed awaiting limit above every count here: only the slots decide.
    fixed = {"min_share": 0, "max_awaiting_first_token": 1000}
    d = Dispatcher(make_config(admission={**fixed, **admission}))
    d.engine_waiting(3, 0.0, running=16)  # the engine ran 16 and queued: its limit is 16
    return d


def test_without_a_surge_batch_fills_every_sequence() -> None:
    d = seed_dispatcher()
    for i in range(20):
        d.arrive(req(f"b{i}", "batch"), 0.0)
    assert len(d.poll(0.1).released) == 20  # work-conserving: max_in_flight is 256
    assert d.stats(0.1).reserved_slots == 0


def test_after_a_surge_batch_leaves_half_the_sequences_to_online() -> None:
    d = seed_dispatcher()
    now = surge(d, 0.0)
    for i in range(20):
        d.arrive(req(f"b{i}", "batch"), now)
    released = d.poll(now + 0.1).released
    assert len(released) == 8  # 16 sequences, ceil(0.5 x 16) = 8 kept for online
    stats = d.stats(now + 0.1)
    assert (stats.reserved_slots, stats.engine_sequences, stats.max_in_flight) == (8, 16, 256)
    for i in range(8):
        d.arrive(req(f"on{i}"), now + 0.2)
    assert ids(d.poll(now + 0.2).released) == [f"on{i}" for i in range(8)]  # found free


def test_a_busy_engine_alone_starts_no_reserve() -> None:
    # The engine queues with online waiting in it, but online never backed up in the gateway.
    d = seed_dispatcher()
    for i in range(20):
        d.arrive(req(f"on{i}"), 0.0)
    d.poll(0.0)
    d.engine_waiting(4, 0.5, running=16)
    for i in range(20):
        d.arrive(req(f"b{i}", "batch"), 0.6)
    assert len(d.poll(0.6).released) == 20
    assert d.stats(0.6).reserved_slots == 0


def test_online_waiting_in_the_engine_extends_the_hold_within_three_holds() -> None:
    d = seed_dispatcher()
    now = surge(d, 0.0)  # backed up at 1.5 s
    d.arrive(req("on-wait"), now)
    assert ids(d.poll(now).released) == ["on-wait"]  # awaits its first token
    for at in (9.0, 18.0, 27.0, 28.0):  # each within the hold in force and 30 s of the backlog
        d.engine_waiting(2, now + at, running=16)
    for i in range(20):
        d.arrive(req(f"b{i}", "batch"), now + 36.0)
    assert len(d.poll(now + 37.0).released) == 7  # held from 28 s: 8 kept, 'on-wait' in
    d.engine_waiting(2, now + 37.5, running=16)  # over 3 holds (30 s) after the backlog
    assert len(d.poll(now + 38.5).released) == 1  # the ramp began at 38 s


def test_the_reserve_lapses_after_its_hold() -> None:
    d = seed_dispatcher()
    now = surge(d, 0.0)
    for i in range(20):
        d.arrive(req(f"b{i}", "batch"), now)
    assert len(d.poll(now + 9.9).released) == 8
    # 10 s after online was last backed up, one sequence back to them per second.
    assert len(d.poll(now + 10.1).released) == 1
    assert d.stats(now + 10.1).reserved_slots == 16 - 9  # of the 16 sequences
    assert len(d.poll(now + 12.0).released) == 2
    assert len(d.poll(now + 16.0).released) == 4
    assert d.stats(now + 16.0).reserved_slots == 16 - 15
    assert len(d.poll(now + 17.0).released) == 5
    assert d.stats(now + 17.0).reserved_slots == 0


def test_the_reserve_follows_its_config() -> None:
    d = seed_dispatcher(recovery_reserve=0.25, recovery_hold_ms=2000)
    now = surge(d, 0.0)
    for i in range(20):
        d.arrive(req(f"b{i}", "batch"), now)
    assert len(d.poll(now).released) == 12
    assert len(d.poll(now + 2.1).released) == 1
    assert len(d.poll(now + 10.0).released) == 7
    off = seed_dispatcher(recovery_reserve=0)
    now = surge(off, 0.0)
    for i in range(20):
        off.arrive(req(f"b{i}", "batch"), now)
    assert len(off.poll(now).released) == 20


def test_without_an_engine_reading_the_reserve_is_a_share_of_max_in_flight() -> None:
    d = Dispatcher(
        make_config(admission={"min_share": 0, "max_in_flight": 16, "max_awaiting_first_token": 16})
    )
    now = surge(d, 0.0)
    for i in range(20):
        d.arrive(req(f"b{i}", "batch"), now)
    assert len(d.poll(now).released) == 8
    # A reading taken while the engine's queue was empty says nothing of its limit.
    e = Dispatcher(make_config(admission={"min_share": 0, "max_awaiting_first_token": 1000}))
    e.engine_waiting(0, 0.0, running=8)
    now = surge(e, 0.0)
    for i in range(300):
        e.arrive(req(f"b{i}", "batch"), now)
    assert len(e.poll(now).released) == 256 - 128


def test_a_new_launch_profile_forgets_the_engine_limit() -> None:
    d = seed_dispatcher()
    d.reconfigure(d.config, 0.0, default_max_in_flight=32)
    now = surge(d, 0.0)
    for i in range(40):
        d.arrive(req(f"b{i}", "batch"), now)
    assert len(d.poll(now).released) == 32 - 16  # learned again: max_in_flight until then


def test_online_may_take_every_slot_during_the_hold() -> None:
    d = seed_dispatcher()
    now = surge(d, 0.0)
    for i in range(20):
        d.arrive(req(f"on{i}"), now)
    assert len(d.poll(now).released) == 20


@pytest.mark.parametrize("value", [1, 1.5, -0.1])
def test_a_reserve_out_of_range_names_the_field(value: float) -> None:
    doc = seed_dict()
    doc["scheduler"]["admission"] = {"recovery_reserve": value}
    with pytest.raises(ConfigError) as caught:
        parse_config(doc)
    assert "scheduler.admission.recovery_reserve" in str(caught.value)
    assert "[0, 1)" in str(caught.value)


def test_a_tier_config_change_keeps_the_learned_engine_limit() -> None:
    # The agent passes its default cap on every reconfigure; only a new max_num_seqs (a new
    # default) means a new engine. Before, any tier-config change forgot the 16 sequences.
    d = seed_dispatcher()
    d.reconfigure(d.config, 0.0, default_max_in_flight=256)  # the same default: same engine
    now = surge(d, 0.0)
    for i in range(20):
        d.arrive(req(f"b{i}", "batch"), now)
    assert len(d.poll(now).released) == 8  # still 16 sequences, 8 kept


def test_the_share_waits_for_the_reserve_unless_online_is_backed_up() -> None:
    # Batch is owed its share (the window holds only online releases) while the reserve
    # holds. A single online arrival is no backlog: the share must not pass the reserve as
    # its request (it used to: each online arrival let an owed batch request in ahead of it).
    d = seed_dispatcher(min_share=0.05)
    now = surge(d, 0.0)
    for i in range(8):
        d.arrive(req(f"on{i}"), now)
    assert len(d.poll(now).released) == 8  # in flight 8: at the reserve's cap
    for i in range(5):
        d.arrive(req(f"b{i}", "batch"), now)
    assert d.poll(now + 0.1).released == []
    d.arrive(req("on-new"), now + 0.2)
    assert ids(d.poll(now + 0.2).released) == ["on-new"]
    # Online backed up again, and by more than the engine clears in OVERLOAD_CLEAR_S at the
    # rate it freed sequences (17 in the last 2 s): an overload. Then the share passes, as
    # online's request.
    late = [f"on-late{i}" for i in range(1 + math.ceil(17 / 2 * OVERLOAD_CLEAR_S))]
    for rid in late:
        d.arrive(req(rid), now + 0.3)
    d.limiter.fixed = 9  # every awaiting slot taken: the late ones wait
    assert d.poll(now + 0.3).released == []
    d.limiter.fixed = 1000
    result = d.poll(now + 1.5)
    assert ids(result.released)[0] == "b4"  # the newest of a stale backlog
    assert result.sent_as["b4"] == "online"


def test_a_backlog_the_engine_clears_soon_is_no_overload() -> None:
    # One online request waited past lifo_after_ms, but the engine frees 8.5 sequences a
    # second: not an overload. The share waits for the reserve's room, and no hold restarts.
    d = seed_dispatcher(min_share=0.05)
    now = surge(d, 0.0)
    for i in range(8):
        d.arrive(req(f"on{i}"), now)
    assert len(d.poll(now).released) == 8
    for i in range(5):
        d.arrive(req(f"b{i}", "batch"), now)
    d.arrive(req("on-late"), now + 0.3)
    d.limiter.fixed = 8  # every awaiting slot taken: "on-late" waits
    assert d.poll(now + 0.3).released == []
    backlog_at = d.recovery.backlog_at
    d.limiter.fixed = 1000
    assert ids(d.poll(now + 1.5).released) == ["on-late"]
    assert d.recovery.backlog_at == backlog_at
