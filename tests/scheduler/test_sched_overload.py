"""The dispatcher's rules for a sustained overload (issue 16, items 3 and 4), fake clock: the
starvation bound's release takes the most urgent tier's awaiting room and, from a stale
backlog, the newest request; a backed-up most urgent tier sends its stale requests as the next
tier's, so that the requests sent after them go first in the engine too."""

from __future__ import annotations

from scheduler import Dispatcher, Request
from tests.scheduler.sched_helpers import make_config


def req(rid: str, tier: str = "online") -> Request:
    return Request(rid, tier, 100, 10)


def ids(reqs: list[Request]) -> list[str]:
    return [r.id for r in reqs]


def test_the_share_reaches_the_engine_while_online_fills_the_awaiting_limit() -> None:
    # The limit of 4 is always full of online requests awaiting their first token (a 10x
    # online flood): before, a batch release counted them and never found room.
    d = Dispatcher(make_config(admission={"max_awaiting_first_token": 4, "min_share": 0.05}))
    now = 0.0
    for i in range(20):
        d.arrive(req(f"b{i}", "batch"), now)
    served: list[str] = []
    for i in range(400):
        for k in range(10):
            d.arrive(req(f"on{i}.{k}"), now)
        result = d.poll(now)
        served += [r.tier for r in result.released]
        for r in result.released:
            if r.tier == "batch":
                # Sent with online's engine priority and counted in online's awaiting.
                assert result.sent_as[r.id] == "online" and r.id in result.promoted
            d.first_token(r.id, now + 0.01)  # one round trip later, so the limit stays full
        now += 0.01
    assert served.count("batch") >= 0.04 * len(served), served.count("batch")
    assert d.stats(now).awaiting_first_token <= 4


def test_the_share_takes_the_newest_of_a_stale_backlog() -> None:
    d = Dispatcher(make_config(admission={"max_in_flight": 1, "min_share": 0.05}))
    d.arrive(req("hold"), 0.0)
    assert ids(d.poll(0.0).released) == ["hold"]
    for i in range(5):
        d.arrive(req(f"b{i}", "batch"), i * 0.5)  # b0 has waited 2 s by t = 2.0
    d.arrive(req("on"), 2.0)
    d.complete("hold", 2.0)
    result = d.poll(2.0)
    assert ids(result.released) == ["b4"] and result.promoted == ["b4"]


def test_the_share_takes_the_oldest_while_the_backlog_is_fresh() -> None:
    d = Dispatcher(make_config(admission={"max_in_flight": 1, "min_share": 0.05}))
    d.arrive(req("hold"), 0.0)
    assert ids(d.poll(0.0).released) == ["hold"]
    for i in range(5):
        d.arrive(req(f"b{i}", "batch"), 0.1 * i)
    d.arrive(req("on"), 0.5)
    d.complete("hold", 0.5)
    assert ids(d.poll(0.5).released) == ["b0"]


def backed_up(limit: int) -> Dispatcher:
    """Online backed up: 30 requests queued at t = 0, the awaiting limit full of online."""
    config = make_config(admission={"max_awaiting_first_token": limit, "min_share": 0})
    d = Dispatcher(config)
    for i in range(limit):
        d.arrive(req(f"hold{i}"), 0.0)
    assert len(d.poll(0.0).released) == limit
    for i in range(30):
        d.arrive(req(f"old{i}"), 0.0)
    assert d.poll(0.0).released == []
    return d


def test_a_stale_request_of_a_backed_up_tier_goes_as_the_next_tiers() -> None:
    d = backed_up(2)
    d.first_token("hold0", 1.5)  # online is backed up (its oldest waited 1.5 s > 1 s)
    result = d.poll(1.5)
    # Newest first, and stale: sent as batch, counted in batch's awaiting.
    assert ids(result.released) == ["old29"] and result.sent_as == {"old29": "batch"}
    # So online's own room is still there: the next freed slot's release is not limited by
    # the stale one now awaiting in the engine (it overtakes it there).
    d.arrive(req("fresh"), 1.6)
    result = d.poll(1.6)
    assert ids(result.released) == ["fresh"] and result.sent_as == {}
    # Stale requests fill batch's room only: batch counts online's and its own awaiting.
    d.first_token("hold1", 1.7)
    assert d.poll(1.7).released == []  # hold's slot went to no one: fresh and old29 await
    d.first_token("fresh", 1.8)
    result = d.poll(1.8)
    assert ids(result.released) == ["old28"] and result.sent_as == {"old28": "batch"}


def test_a_stale_request_keeps_its_tier_against_an_fcfs_engine() -> None:
    config = make_config(
        admission={"max_awaiting_first_token": 2, "min_share": 0, "pass_priority": False}
    )
    d = Dispatcher(config)
    d.arrive(req("hold0"), 0.0)
    d.arrive(req("hold1"), 0.0)
    d.poll(0.0)
    for i in range(30):
        d.arrive(req(f"old{i}"), 0.0)
    d.first_token("hold0", 1.5)
    result = d.poll(1.5)
    assert ids(result.released) == ["old29"] and result.sent_as == {}


def test_the_share_may_take_a_reserved_slot() -> None:
    # 16 slots, 4 reserved for online: online holds all 16 and keeps coming, one slot freeing
    # at a time. The share's release goes as an online request, so it may take that slot;
    # else reserved_slots would turn the starvation bound off whenever online fills the rest.
    admission = {"max_in_flight": 16, "reserved_slots": 4, "min_share": 0.05}
    d = Dispatcher(make_config(admission={**admission, "max_awaiting_first_token": 100}))
    for i in range(16):
        d.arrive(req(f"hold{i}"), 0.0)
    held = ids(d.poll(0.0).released)
    assert len(held) == 16
    d.arrive(req("b0", "batch"), 0.0)
    served: list[str] = []
    for i in range(100):
        now = 0.01 * (i + 1)
        d.arrive(req(f"on{i}"), now)
        d.arrive(req(f"on{i}b"), now)
        d.complete(held.pop(0), now)
        released = ids(d.poll(now).released)
        held += released
        served += released
    assert "b0" in served


def _serve_online(d: Dispatcher, count: int, now: float) -> float:
    """`count` online requests one after another, each served at once; the clock after."""
    for i in range(count):
        d.arrive(req(f"on{i}"), now)
        for r in d.poll(now).released:
            d.first_token(r.id, now)
            d.complete(r.id, now)
        now += 0.05
    return now


def test_the_share_of_a_tier_with_nothing_ahead_goes_as_its_own() -> None:
    # Online filled the share window; then a lone offline request arrives with nothing more
    # urgent waiting. It is owed its share, but passes no one: it keeps its own tier (its own
    # engine priority), where before it was sent as an online request.
    d = Dispatcher(make_config(admission={"min_share": 0.05}))
    now = _serve_online(d, 30, 0.0)
    d.arrive(req("off", "offline"), now)
    result = d.poll(now)
    assert ids(result.released) == ["off"]
    assert result.sent_as == {}
    # With an online request queued ahead of it, the share does send it as online's.
    d2 = Dispatcher(make_config(admission={"max_in_flight": 1, "min_share": 0.05}))
    now = _serve_online(d2, 30, now)
    d2.arrive(req("busy"), now)
    d2.poll(now)  # takes the one slot
    d2.arrive(req("on-late"), now)
    d2.arrive(req("off2", "offline"), now)
    d2.first_token("busy", now)
    d2.complete("busy", now)
    result = d2.poll(now)
    assert ids(result.released) == ["off2"]
    assert result.sent_as == {"off2": "online"} and result.promoted == ["off2"]


def test_the_share_goes_as_the_most_urgent_tier_that_waits_here() -> None:
    # Batch waits here behind the awaiting limit, online does not (the engine serves it as it
    # comes). An owed offline request passes batch, so it goes as batch's, not as online's:
    # with online's priority it would take the next free sequence ahead of online's own
    # requests, and they would wait out its prefill.
    d = Dispatcher(make_config(admission={"max_awaiting_first_token": 2, "min_share": 0.05}))
    now = _serve_online(d, 30, 0.0)
    for i in range(3):
        d.arrive(req(f"b{i}", "batch"), now)
    assert ids(d.poll(now).released) == ["b0", "b1"]  # the limit holds b2
    d.arrive(req("off", "offline"), now)
    result = d.poll(now)
    assert ids(result.released) == ["off"] and result.promoted == ["off"]
    assert result.sent_as == {"off": "batch"}
    assert d.stats(now).tiers["batch"].awaiting_first_token == 3  # where the engine has it


def test_a_stale_backlog_that_may_not_go_leaves_the_slot_to_the_next_tier() -> None:
    # Online's oldest is stale (its backlog goes as batch's), but batch, with an age bound, is
    # held while its own aged request awaits as online's. The free slot must not stay idle
    # while offline waits: before, the poll ended there (found by the property test).
    config = make_config(
        {"batch": {"promote_after_ms": 5}},
        admission={"max_in_flight": 3, "max_awaiting_first_token": 2, "lifo_after_ms": 10,
                   "min_share": 0, "recovery_reserve": 0},
    )  # fmt: skip
    d = Dispatcher(config)
    d.arrive(req("b1", "batch"), 0.0)
    assert ids(d.poll(0.0).released) == ["b1"]
    d.arrive(req("on-x"), 0.0)
    assert ids(d.poll(0.0).released) == ["on-x"]
    d.arrive(req("on0"), 0.0)
    d.arrive(req("off0", "offline"), 0.0)
    assert d.poll(0.0).released == []
    # Nothing has ended, so the engine clears none of online's backlog soon: an overload.
    d.first_token("on-x", 1.0)
    assert ids(d.poll(1.0).released) == ["off0"]


def test_a_share_owed_is_paid_one_request_at_a_time() -> None:
    # Online filled the share window (128 releases), then offline requests arrive while online
    # keeps coming: offline is owed 7 (5% of 128). Paid at once, 7 long prompts would enter
    # the engine at online's priority, ahead of every online request sent next, which would
    # wait out all of their prefills (measured on a real vLLM: online TTFT 1.3 s for a
    # second). One at a time: the next only once the last has its first token.
    d = Dispatcher(make_config(admission={"max_awaiting_first_token": 4, "min_share": 0.05}))
    now = _serve_online(d, 128, 0.0)
    for i in range(10):
        d.arrive(req(f"off{i}", "offline"), now)
    d.arrive(req("hold0"), now)  # online waits: the share passes it, as online's request
    result = d.poll(now)
    assert result.promoted == ["off0"] and result.sent_as == {"off0": "online"}
    d.arrive(req("wait0"), now + 0.05)
    assert d.poll(now + 0.05).promoted == []  # off0 still awaits its first token
    d.first_token("off0", now + 0.1)
    paid = ["off0"]
    for step in range(1, 11):
        now += 0.1
        d.arrive(req(f"wait{step}"), now)
        result = d.poll(now)
        assert len(result.promoted) <= 1, result.promoted
        paid += result.promoted
        for r in result.released:  # each has its first token before the next poll
            d.first_token(r.id, now)
    assert len(paid) >= 4, paid  # still paid, one per first token
