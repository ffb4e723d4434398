"""Each dispatcher rule of docs/architecture.md#the-dispatchers-semantics under a fake clock (times
are plain floats)."""

from __future__ import annotations

import pytest

from scheduler import QUEUE_FULL, QUEUE_TIMEOUT, Dispatcher, Request
from scheduler.limiter import RATE_WINDOW_S
from tests.scheduler.sched_helpers import make_config

WIDE = {"max_awaiting_first_token": 1000, "max_in_flight": 1000}


def req(rid: str, tier: str = "online", prompt: int = 100, max_tokens: int = 10) -> Request:
    return Request(rid, tier, prompt, max_tokens)


def ids(reqs: list[Request]) -> list[str]:
    return [r.id for r in reqs]


def saturate(d: Dispatcher, slots: int, now: float = 0.0) -> list[str]:
    """Fill every slot with a request of its own, so that arrivals queue (a saturated engine)."""
    holders = [f"hold{i}" for i in range(slots)]
    for rid in holders:
        d.arrive(req(rid), now)
    assert ids(d.poll(now).released) == holders
    for rid in holders:
        d.first_token(rid, now, timed=False)
    return holders


def test_a_free_slot_releases_at_once_whatever_the_window() -> None:
    d = Dispatcher(make_config())  # the seed verbatim: 10 / 50 / 200 ms windows
    for tier in ("offline", "batch", "online"):
        d.arrive(req(f"{tier}1", tier), 0.0)
    result = d.poll(0.0)
    assert ids(result.released) == ["online1", "batch1", "offline1"]
    assert result.next_wakeup is None  # nothing waits for a timer


STRICT = {"min_share": 0}  # no starvation bound: the order is priority and windows alone


def test_batch_size_makes_a_tier_ready_under_saturation() -> None:
    d = Dispatcher(
        make_config(admission={"max_in_flight": 2, "max_awaiting_first_token": 100, **STRICT})
    )
    holders = saturate(d, 2)
    d.arrive(req("b0", "batch"), 0.0)
    for i in range(7):
        d.arrive(req(f"r{i}"), 0.001)
    d.complete(holders[0], 0.002)
    assert ids(d.poll(0.002).released) == ["r0"]  # nothing ready: the most urgent goes
    d.arrive(req("r7"), 0.003)
    d.arrive(req("r8"), 0.003)
    d.arrive(req("b1", "batch"), 0.06)  # batch ready (b0 waited 60 ms), online not ready...
    d.complete(holders[1], 0.004)
    assert ids(d.poll(0.004).released) == ["r1"]  # ...yet: online has 8 pending, so it is


def test_token_sum_makes_a_tier_ready_under_saturation() -> None:
    d = Dispatcher(make_config(admission={"max_in_flight": 1, "max_awaiting_first_token": 100}))
    [holder] = saturate(d, 1)
    d.arrive(req("b", "batch", prompt=10), 0.0)
    d.arrive(req("o", prompt=2000, max_tokens=48), 0.0)
    d.arrive(req("p", prompt=2000, max_tokens=47), 0.0)  # 4095 tokens: one short
    d.arrive(req("b2", "batch", prompt=10), 0.06)
    # batch is ready (50 ms), online is not and holds 4095 tokens: batch goes
    d.complete(holder, 0.06)
    assert ids(d.poll(0.06).released) == ["b"]
    d.arrive(req("q", prompt=1, max_tokens=1), 0.061)  # 4097: ready
    d.complete("b", 0.061)
    assert ids(d.poll(0.061).released) == ["o"]


def test_waiting_time_makes_a_tier_ready_under_saturation() -> None:
    d = Dispatcher(make_config(admission={"max_in_flight": 1, "max_awaiting_first_token": 100}))
    [holder] = saturate(d, 1)
    d.arrive(req("b", "batch"), 0.0)
    d.arrive(req("o"), 0.045)
    d.complete(holder, 0.0549)
    assert ids(d.poll(0.0549).released) == ["b"]  # batch waited its 50 ms, online 9.9 of 10
    d.arrive(req("b2", "batch"), 0.0)
    d.complete("b", 0.056)
    assert ids(d.poll(0.056).released) == ["o"]  # online waited 11 ms: ready, more urgent


@pytest.mark.parametrize(
    ("depth", "enabled", "wait"), [(10, True, 0.010), (11, True, 0.005), (11, False, 0.010)]
)
def test_adaptive_reduction_applies_only_above_the_threshold(
    depth: int, enabled: bool, wait: float
) -> None:
    config = make_config(
        queues={"online": {"max_batch_size": 64}},
        adaptive={"enabled": enabled},
        admission={"max_in_flight": 1, "max_awaiting_first_token": 100, **STRICT},
    )
    d = Dispatcher(config)
    [holder] = saturate(d, 1)
    d.arrive(req("b", "batch"), -1.0)  # batch long ready
    for i in range(depth):
        d.arrive(req(f"r{i}"), 0.0)
    assert d.stats(0.0).tiers["online"].effective_wait_s == pytest.approx(wait)
    assert d.stats(0.0).tiers["online"].adaptive_active is (depth > 10 and enabled)
    assert d.stats(wait - 1e-6).tiers["online"].ready is False
    assert d.stats(wait).tiers["online"].ready is True
    d.complete(holder, wait)
    assert ids(d.poll(wait).released) == ["r0"]


def test_adaptive_rule_can_target_another_tier() -> None:
    config = make_config(adaptive={"tier": "batch", "online_pressure_threshold": 1})
    d = Dispatcher(config)
    d.arrive(req("b1", "batch"), 0.0)
    d.arrive(req("b2", "batch"), 0.0)
    assert d.stats(0.0).tiers["batch"].effective_wait_s == pytest.approx(0.025)
    assert d.stats(0.0).tiers["online"].effective_wait_s == pytest.approx(0.010)


def test_most_urgent_ready_tier_goes_first() -> None:
    d = Dispatcher(make_config(admission={"max_in_flight": 1}))
    d.arrive(req("off", "offline"), 0.0)
    d.arrive(req("bat", "batch"), 0.1)
    d.arrive(req("onl", "online"), 0.2)
    assert ids(d.poll(1.0).released) == ["onl"]
    d.complete("onl", 1.0)
    assert ids(d.poll(1.0).released) == ["bat"]
    d.complete("bat", 1.0)
    assert ids(d.poll(1.0).released) == ["off"]


def test_less_urgent_ready_tier_goes_while_the_urgent_one_is_not_ready() -> None:
    d = Dispatcher(make_config(admission={"max_in_flight": 1, "max_awaiting_first_token": 9}))
    [holder] = saturate(d, 1)
    d.arrive(req("bat", "batch"), 0.0)
    d.arrive(req("onl", "online"), 0.049)
    d.complete(holder, 0.05)
    assert ids(d.poll(0.05).released) == ["bat"]  # online has waited 1 ms of its 10


def test_reserved_slots_are_left_to_the_most_urgent_tier() -> None:
    d = Dispatcher(
        make_config(
            admission={"max_in_flight": 4, "reserved_slots": 2, "max_awaiting_first_token": 100}
        )
    )
    for i in range(10):
        d.arrive(req(f"b{i}", "batch"), 0.0)
    assert ids(d.poll(1.0).released) == ["b0", "b1"]
    assert d.poll(2.0).released == []
    for i in range(3):
        d.arrive(req(f"o{i}"), 2.0)
    assert ids(d.poll(3.0).released) == ["o0", "o1"]
    assert d.in_flight == 4


def test_a_reserve_that_follows_arrivals_stands_one_slot_per_recent_urgent_arrival() -> None:
    """`reserve_follows_arrivals`: at most one reserved slot per most urgent arrival in the last
    RATE_WINDOW_S. With none, every slot is work for the less urgent tiers (a drain after a
    busy spell, a quiet hour), and the poll asks to be woken when the reserve lapses."""
    admission = {"max_in_flight": 4, "reserved_slots": 2, "max_awaiting_first_token": 100}
    d = Dispatcher(make_config(admission={**admission, "reserve_follows_arrivals": True}))
    for i in range(10):
        d.arrive(req(f"b{i}", "batch"), 0.0)
    assert ids(d.poll(0.5).released) == ["b0", "b1", "b2", "b3"]  # no online yet: no reserve
    for rid in ("b0", "b1", "b2", "b3"):
        d.complete(rid, 0.6)
    d.arrive(req("o0"), 0.6)
    result = d.poll(0.7)
    assert ids(result.released) == ["o0", "b4", "b5"]  # one online arrival holds one slot
    assert d.stats(0.7).reserved_slots == 1
    assert result.next_wakeup == pytest.approx(0.6 + RATE_WINDOW_S)
    assert d.poll(2.5).released == []
    assert ids(d.poll(2.7).released) == ["b6"]  # its arrival is over 2 s old: the slot is batch's
    assert d.stats(2.7).reserved_slots == 0
    # Without it (the default, docs/architecture.md#the-dispatchers-semantics) the reserve stands
    # with no online arrival at all.
    static = Dispatcher(make_config(admission=admission))
    for i in range(10):
        static.arrive(req(f"b{i}", "batch"), 0.0)
    assert ids(static.poll(0.5).released) == ["b0", "b1"]
    assert static.poll(10.0).released == [] and static.stats(10.0).reserved_slots == 2


def test_a_standing_reserve_keeps_its_last_slots_whoever_holds_the_rest() -> None:
    """The trunk rule (docs/architecture.md#the-dispatchers-semantics): the less urgent tiers
    start only while more than `reserved_slots` slots are free, so with online holding some,
    slots stand idle while batch waits. (`reserve_caps_lower_tiers`, which let online's own
    requests take from the reserve instead, was removed for lack of a measured gain.)"""
    admission = {"max_in_flight": 4, "reserved_slots": 2, "max_awaiting_first_token": 100}
    admission["min_share"] = 0  # no starvation-bound release: only the room rules act
    d = Dispatcher(make_config(admission=admission))
    d.arrive(req("o0"), 0.0)
    d.arrive(req("o1"), 0.0)
    assert ids(d.poll(0.1).released) == ["o0", "o1"]
    for i in range(10):
        d.arrive(req(f"b{i}", "batch"), 0.2)
    assert d.poll(0.3).released == [] and d.in_flight == 2  # 2 free: both the reserve's
    d.complete("o0", 0.4)
    assert ids(d.poll(0.5).released) == ["b0"] and d.in_flight == 2


def test_awaiting_first_token_caps_releases_until_a_first_token() -> None:
    # FIFO throughout (the queue is older than the default lifo_after_ms by the end).
    d = Dispatcher(make_config(admission={"max_awaiting_first_token": 2, "lifo_after_ms": None}))
    for i in range(5):
        d.arrive(req(f"r{i}"), 0.0)
    assert ids(d.poll(1.0).released) == ["r0", "r1"]
    assert d.poll(1.0).released == []
    d.first_token("r0", 1.1)
    d.first_token("r0", 1.1)  # a repeat changes nothing
    assert ids(d.poll(1.1).released) == ["r2"]
    d.complete("r1", 1.2)
    assert ids(d.poll(1.2).released) == ["r3"]
    assert d.awaiting_first_token == 2 and d.in_flight == 3


def test_max_in_flight_is_a_hard_cap() -> None:
    d = Dispatcher(make_config(admission={"max_in_flight": 3, "max_awaiting_first_token": 10}))
    for i in range(8):
        d.arrive(req(f"r{i}"), 0.0)
    assert len(d.poll(0.0).released) == 3
    for rid in ("r0", "r1", "r2"):
        d.first_token(rid, 0.1)
    assert d.poll(0.1).released == []
    d.complete("r0", 0.2)
    assert ids(d.poll(0.2).released) == ["r3"]


def test_release_takes_the_oldest_requests_length_group_first() -> None:
    config = make_config(queues={"batch": {"length_groups": [512, 2048]}}, admission=WIDE)
    d = Dispatcher(config)
    arrivals = [
        ("long1", 3000),
        ("short1", 100),
        ("long2", 4000),
        ("short2", 512),
        ("mid1", 1000),
        ("long3", 2049),
    ]
    for t, (rid, prompt) in enumerate(arrivals):
        d.arrive(req(rid, "batch", prompt=prompt), t * 0.001)
    released = d.poll(1.0).released
    assert ids(released) == ["long1", "long2", "long3", "short1", "short2", "mid1"]


def test_release_stops_at_the_token_cap_without_skipping() -> None:
    d = Dispatcher(make_config(admission=WIDE))
    d.arrive(req("a", prompt=1500, max_tokens=500), 0.0)
    d.arrive(req("b", prompt=1500, max_tokens=500), 0.0)
    d.arrive(req("c", prompt=1500, max_tokens=500), 0.0)  # 6000 >= 4096: ready
    d.arrive(req("d", prompt=10, max_tokens=10), 0.0)
    assert ids(d.poll(0.0).released) == ["a", "b", "c", "d"]
    assert [r.size for r in d.stats(0.0).recent_releases] == [2, 2]


def test_an_oversize_request_goes_alone() -> None:
    d = Dispatcher(make_config(admission=WIDE))
    d.arrive(req("huge", prompt=5000, max_tokens=100), 0.0)
    d.arrive(req("small", prompt=10, max_tokens=10), 0.0)
    assert ids(d.poll(0.0).released) == ["huge", "small"]
    assert [r.size for r in d.stats(0.0).recent_releases] == [1, 1]


def test_cancel_removes_a_queued_request_and_frees_a_released_slot() -> None:
    d = Dispatcher(make_config(admission={"max_in_flight": 1}))
    d.arrive(req("a"), 0.0)
    d.arrive(req("b"), 0.0)
    d.arrive(req("c"), 0.0)
    assert d.cancel("b", 0.001) is True
    assert d.stats(0.001).tiers["online"].depth == 2
    assert ids(d.poll(0.01).released) == ["a"]
    assert d.cancel("a", 0.02) is True  # client left mid-stream: slot comes back
    assert ids(d.poll(0.02).released) == ["c"]
    assert d.cancel("b", 0.03) is False
    assert d.cancel("nobody", 0.03) is False
    assert d.stats(0.03).tiers["online"].cancelled == 1


def test_many_cancels_are_swept_and_do_not_disturb_order() -> None:
    d = Dispatcher(make_config(queues={"offline": {"max_batch_size": 1000}}, admission=WIDE))
    for i in range(500):
        d.arrive(req(f"r{i}", "offline"), 0.0)
    for i in range(500):
        if i % 5:
            d.cancel(f"r{i}", 0.0)
    assert d.stats(0.0).tiers["offline"].depth == 100
    assert ids(d.poll(1.0).released) == [f"r{i}" for i in range(0, 500, 5)]


def test_full_queue_is_refused_with_a_retry_after_from_the_drain_rate() -> None:
    d = Dispatcher(make_config(queues={"online": {"max_queue_depth": 4}}, admission=WIDE))
    for i in range(4):
        assert d.arrive(req(f"r{i}"), 0.0) is None
    refusal = d.arrive(req("x"), 0.0)
    assert refusal is not None and refusal.reason == QUEUE_FULL and refusal.status == 429
    assert refusal.retry_after_s == 5.0  # nothing drained yet: the fixed default
    # drain 1 request per second for 10 s, then fill again: 4 queued -> about 4 s
    d.poll(0.01)
    for t in range(1, 11):
        d.arrive(req(f"d{t}"), float(t))
        d.poll(float(t) + 0.01)
    for i in range(4):
        d.arrive(req(f"q{i}"), 11.0)
    refusal = d.arrive(req("y"), 11.0)
    assert refusal is not None and refusal.retry_after_s == pytest.approx(4 / (14 / 11.0), rel=0.01)
    assert d.stats(11.0).tiers["online"].rejections == {QUEUE_FULL: 2}


def test_queue_timeout_rejects_with_503_and_sets_the_wakeup() -> None:
    config = make_config(
        queues={"batch": {"queue_timeout_ms": 100}}, admission={"max_in_flight": 1}
    )
    d = Dispatcher(config)
    d.arrive(req("busy"), 0.0)
    assert ids(d.poll(0.01).released) == ["busy"]
    d.arrive(req("b1", "batch"), 0.02)
    d.arrive(req("b2", "batch"), 0.05)
    deadline = d.poll(0.07).next_wakeup  # ready but blocked: only the timeout wakes it
    assert deadline == pytest.approx(0.12)
    assert d.poll(deadline - 1e-9).rejected == []
    result = d.poll(deadline)
    assert [(r.id, j.reason, j.status) for r, j in result.rejected] == [("b1", QUEUE_TIMEOUT, 503)]
    assert result.next_wakeup == pytest.approx(0.15)
    d.complete("busy", 0.13)
    assert ids(d.poll(0.13).released) == ["b2"]
    assert d.stats(0.13).tiers["batch"].rejections == {QUEUE_TIMEOUT: 1}


def test_unknown_tier_and_duplicate_id_raise() -> None:
    d = Dispatcher(make_config())
    with pytest.raises(ValueError, match="unknown tier"):
        d.arrive(req("a", "gold"), 0.0)
    d.arrive(req("a"), 0.0)
    with pytest.raises(ValueError, match="already held"):
        d.arrive(req("a"), 0.0)


def test_reconfigure_moves_a_removed_tiers_queue_and_keeps_in_flight() -> None:
    d = Dispatcher(make_config(admission={"max_in_flight": 1}))
    d.arrive(req("b0", "batch"), 0.0)
    assert ids(d.poll(0.05).released) == ["b0"]
    d.arrive(req("b1", "batch"), 0.06)
    d.arrive(req("o1", "offline"), 0.07)
    d.arrive(req("b2", "batch"), 0.08)
    d.reconfigure(make_config(admission={"max_in_flight": 1}, drop=("batch",)), 0.09)
    assert d.tier_of("b1") == "offline" and d.tier_of("b0") == "offline"
    stats = d.stats(0.09)
    assert set(stats.tiers) == {"online", "offline"}
    assert stats.tiers["offline"].depth == 3 and stats.tiers["offline"].in_flight == 1
    d.complete("b0", 0.1)
    # arrival order is kept across the move
    assert ids(d.poll(0.1).released) == ["b1"]
    d.complete("b1", 0.1)
    assert ids(d.poll(0.1).released) == ["o1"]


def test_reconfigure_with_a_lower_cap_releases_nothing_until_under_it() -> None:
    d = Dispatcher(make_config(admission={"max_in_flight": 4, "max_awaiting_first_token": 10}))
    for i in range(6):
        d.arrive(req(f"r{i}"), 0.0)
    assert len(d.poll(0.01).released) == 4
    d.reconfigure(make_config(admission={"max_in_flight": 2, "max_awaiting_first_token": 10}), 0.1)
    d.complete("r0", 0.1)
    assert d.poll(0.1).released == []
    d.complete("r1", 0.1)
    d.complete("r2", 0.1)
    assert ids(d.poll(0.1).released) == ["r4"]


def test_stats_report_waits_and_padding() -> None:
    d = Dispatcher(make_config(admission=WIDE))
    d.arrive(req("a", prompt=100), 0.0)
    d.arrive(req("b", prompt=300), 0.004)
    d.poll(0.01)
    online = d.stats(0.01).tiers["online"]
    assert online.released == 2 and online.in_flight == 2 and online.awaiting_first_token == 2
    assert online.last_padding_ratio == pytest.approx(200 / 600)
    assert online.queue_wait.count == 2
    assert online.queue_wait.max_s == pytest.approx(0.01)
    assert online.queue_wait.p50_s == pytest.approx(0.006)
    assert d.stats(0.01).tiers["batch"].queue_wait.p99_s is None


def contended_by_online(
    offline_prompt: int, offline_max_tokens: int, polls: int
) -> tuple[Dispatcher, list[str], set[str]]:
    """A 10% `min_share`, 100 offline requests queued, then an online request a poll for
    `polls` polls (10 ms apart) on a single slot, each release completed at once. Returns the
    dispatcher, the tiers of the released requests in order, and the tiers of those the
    bound released."""
    config = make_config(
        queues={"online": {"max_waiting_time_ms": 0.001}},
        admission={"max_in_flight": 1, "max_awaiting_first_token": 100, "min_share": 0.1},
    )
    d = Dispatcher(config)
    for i in range(100):
        d.arrive(req(f"off{i}", "offline", offline_prompt, offline_max_tokens), 0.0)
    now = 0.0
    order: list[str] = []
    owed: set[str] = set()
    for i in range(polls):  # online keeps the single slot contended the whole time
        d.arrive(req(f"on{i}"), now)
        now += 0.01
        result = d.poll(now)
        order += [d.tier_of(r.id) or "?" for r in result.released]
        owed |= {r.tier for r in result.released if r.id in result.promoted}
        for r in result.released:
            d.complete(r.id, now)
    return d, order, owed


def test_a_starved_tier_gets_its_minimum_share_of_releases() -> None:
    d, order, owed = contended_by_online(100, 10, polls=400)
    assert owed == {"offline"}
    tail = order[-200:]
    share = tail.count("offline") / len(tail)
    assert 0.09 <= share <= 0.12, share  # the bound, and not much more while online waits
    stats = d.stats(4.0)
    assert stats.tiers["offline"].release_share == pytest.approx(0.1, abs=0.02)


def test_the_minimum_share_is_of_engine_work_not_of_requests() -> None:
    # Offline requests are ten times online's work (prompt + max tokens: 1,100 against 110):
    # a 10% share of the engine is about one offline release in a hundred, not one in ten.
    # Online's share of the window's work is under 10% at first (offline's requests are
    # big), but the most urgent tier is never owed: it goes first anyway.
    d, order, owed = contended_by_online(1000, 100, polls=1200)
    assert owed == {"offline"}
    tail = order[-1000:]
    offline = tail.count("offline")
    work = offline * 1100 / (offline * 1100 + (len(tail) - offline) * 110)
    # The bound in work, and at most one request more (the window holds 128 releases: two
    # offline ones there are 14% of its work, one is 7%).
    assert 0.09 <= work <= 0.15, (offline, work)
    assert offline <= 20, offline  # counted in requests it would have been about 100
    offline_stats = d.stats(12.0).tiers["offline"]
    assert offline_stats.work_share is not None and offline_stats.release_share is not None
    assert 0.07 <= offline_stats.work_share <= 0.15
    assert offline_stats.release_share < 0.02


def test_without_a_minimum_share_a_lower_tier_starves() -> None:
    config = make_config(admission={"max_in_flight": 1, "max_awaiting_first_token": 100, **STRICT})
    d = Dispatcher(config)
    d.arrive(req("off", "offline"), 0.0)
    d.arrive(req("first"), 0.0)
    assert ids(d.poll(0.0).released) == ["first"]
    for i in range(50):
        d.arrive(req(f"on{i}"), i * 0.02)
        d.complete("first" if i == 0 else f"on{i - 1}", i * 0.02 + 0.015)
        assert ids(d.poll(i * 0.02 + 0.015).released) == [f"on{i}"]
    assert d.is_queued("off")


def test_a_promoted_request_is_reported_for_the_engine_priority() -> None:
    config = make_config(admission={"max_in_flight": 1, "max_awaiting_first_token": 9})
    d = Dispatcher(config)
    [holder] = saturate(d, 1)  # online now holds the whole share window
    d.arrive(req("off", "offline"), 0.0)
    d.arrive(req("on"), 0.0)
    d.complete(holder, 0.02)
    result = d.poll(0.02)
    assert ids(result.released) == ["off"] and result.promoted == ["off"]


@pytest.mark.parametrize("engine_priority", [True, False])
def test_less_urgent_requests_awaiting_in_a_priority_engine_do_not_block_urgent_ones(
    engine_priority: bool,
) -> None:
    config = make_config(
        admission={"max_awaiting_first_token": 2, "pass_priority": engine_priority, **STRICT}
    )
    d = Dispatcher(config)
    d.arrive(req("b1", "batch"), 0.0)
    d.arrive(req("b2", "batch"), 0.0)
    assert ids(d.poll(0.0).released) == ["b1", "b2"]  # both wait in the engine's queue
    d.arrive(req("o1"), 0.01)
    d.arrive(req("b3", "batch"), 0.01)
    # The engine would start o1 before b1 and b2: holding it back only adds delay.
    assert ids(d.poll(0.01).released) == (["o1"] if engine_priority else [])


def test_an_aged_request_goes_one_tier_up_and_carries_its_priority() -> None:
    config = make_config(
        queues={"offline": {"promote_after_ms": 100}},
        admission={"max_in_flight": 1, "min_share": 0},
    )
    d = Dispatcher(config)
    d.arrive(req("b0", "batch"), 0.0)
    d.arrive(req("off", "offline"), 0.0)
    d.arrive(req("b1", "batch"), 0.05)
    first = d.poll(0.0)
    assert ids(first.released) == ["b0"] and first.next_wakeup == pytest.approx(0.1)
    d.complete("b0", 0.2)
    result = d.poll(0.2)  # off waited past 100 ms: ahead of the older-queued, more urgent b1
    assert ids(result.released) == ["off"] and result.aged == ["off"]
    assert result.sent_as == {"off": "batch"} and result.promoted == []


def test_the_most_urgent_tier_of_a_priority_engine_may_exceed_the_limit_by_its_drain() -> None:
    d = Dispatcher(make_config(admission={"max_in_flight": 1000}))
    for i in range(200):  # 100 online first tokens a second for 2 s, each 10 ms after release
        d.arrive(req(f"w{i}"), i * 0.01)
        d.poll(i * 0.01)
        d.first_token(f"w{i}", i * 0.01 + 0.01)
    limit = d.max_awaiting
    for i in range(200):
        d.arrive(req(f"r{i}"), 2.0)
        d.arrive(req(f"o{i}", "offline"), 2.0)
    released = ids(d.poll(2.0).released)
    online = [r for r in released if r.startswith("r")]
    # half a second of its drain (~50) on top of the limit; the less urgent tier gets the limit
    assert limit + 40 <= len(online) <= limit + 60, (limit, len(online))
    assert len(released) - len(online) <= limit


@pytest.mark.parametrize("engine_priority", [True, False])
def test_the_most_urgent_tier_of_a_priority_engine_goes_ahead_of_less_urgent_ones_awaiting(
    engine_priority: bool,
) -> None:
    d = Dispatcher(
        make_config(admission={"max_in_flight": 1000, "pass_priority": engine_priority, **STRICT})
    )
    limit = d.max_awaiting  # adaptive, no first token yet: no drain allowance either
    for i in range(limit):  # released while nothing more urgent waits: the engine's queue
        d.arrive(req(f"b{i}", "batch"), 0.0)
    assert len(d.poll(0.0).released) == limit
    for i in range(3 * limit):
        d.arrive(req(f"o{i}"), 0.01)
    online = ids(d.poll(0.01).released)
    # The engine starts each of them before any batch request waiting there: held here, a
    # batch request would take the slot that frees first. An FCFS engine would not.
    assert online == ([f"o{i}" for i in range(2 * limit)] if engine_priority else [])
