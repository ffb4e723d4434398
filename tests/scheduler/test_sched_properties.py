"""Property tests: the invariants of docs/architecture.md#the-dispatchers-semantics over random
event sequences.

A small reference model tracks what must be queued, in flight and awaiting a first token, and
decides readiness on its own (straight from the rules, by scanning), so every poll of the real
dispatcher can be checked against it.
"""

from __future__ import annotations

import math
import os
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler import QUEUE_FULL, QUEUE_TIMEOUT, Dispatcher, Request, TierConfig, parse_config
from scheduler.dispatcher import SHARE_WINDOW
from scheduler.limiter import RATE_WINDOW_S
from scheduler.reserve import EXTEND_HOLDS, RAMP_S
from scheduler.rooms import OVERLOAD_CLEAR_S

NAMES = ("a", "b", "c")


@st.composite
def configs(draw: st.DrawFn) -> TierConfig:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
    priorities = draw(st.permutations(range(1, 4)))
    queues: dict[str, Any] = {}
    for name, prio in zip(names, priorities, strict=False):
        queue: dict[str, Any] = {
            "max_batch_size": draw(st.integers(1, 5)),
            "max_waiting_time_ms": draw(st.integers(1, 40)),
            "max_tokens_per_batch": draw(st.integers(40, 300)),
            "priority": prio,
        }
        if draw(st.booleans()):
            queue["max_queue_depth"] = draw(st.integers(1, 6))
        if draw(st.booleans()):
            queue["queue_timeout_ms"] = draw(st.integers(5, 80))
        queue["length_groups"] = draw(st.sampled_from([[], [50], [30, 80]]))
        queues[name] = queue
    cap = draw(st.integers(1, 5))
    admission: dict[str, Any] = {
        "max_in_flight": cap,
        "reserved_slots": draw(st.integers(0, cap - 1)),
        "reserve_follows_arrivals": draw(st.booleans()),
        "min_share": draw(st.sampled_from([0, 0.05, 0.2, 0.45])),
    }
    if draw(st.booleans()):  # else adapted by the limiter
        admission["max_awaiting_first_token"] = draw(st.integers(1, 4))
    admission["pass_priority"] = draw(st.booleans())
    # The recovery reserve (scheduler/reserve.py): its share of the sequences and its hold.
    reserve = draw(st.sampled_from([0, 0.25, 0.5, "default"]))
    hold = draw(st.sampled_from([None, 20, 100, "default"]))  # ms; the ramp is 1 s a step
    if reserve != "default":
        admission["recovery_reserve"] = reserve
    if hold != "default":
        admission["recovery_hold_ms"] = hold
    # The overload bounds (adaptive LIFO, the default sojourn bound) and the age bound.
    lifo = draw(st.sampled_from([None, 10, 40, 1000, "default"]))
    shed = draw(st.sampled_from([None, 60, 30000, "default"]))
    if lifo != "default":
        admission["lifo_after_ms"] = lifo
    if shed != "default":
        admission["shed_after_ms"] = shed
    lifo_ms = 1000 if lifo == "default" else lifo
    shed_ms = 30000 if shed == "default" else shed
    if lifo_ms is not None and shed_ms is not None and shed_ms <= lifo_ms:
        admission["lifo_after_ms"] = None
    first = min(queues, key=lambda n: queues[n]["priority"])
    for name, queue in queues.items():
        promote = draw(st.sampled_from([None, None, 5, 20, 60]))
        bound = queue.get("queue_timeout_ms", shed_ms)
        if name != first and promote is not None and (bound is None or promote < bound):
            queue["promote_after_ms"] = promote
    doc = {
        "scheduler": {
            "queues": queues,
            "adaptive": {
                "enabled": draw(st.booleans()),
                "online_pressure_threshold": draw(st.integers(0, 2)),
                "wait_time_reduction_ratio": draw(st.sampled_from([0.25, 0.5, 1])),
                "tier": draw(st.sampled_from(names)),
            },
            "admission": admission,
        }
    }
    return parse_config(doc)


arrivals = st.tuples(
    st.just("arrive"),
    st.integers(0, 9),
    st.integers(1, 120),
    st.integers(1, 60),
    st.integers(0, 15),
)
# Mostly a few ms on; now and then past RATE_WINDOW_S, the memory of the standing reserve and
# of the freed rate.
polls = st.tuples(st.just("poll"), st.one_of(st.integers(0, 30), st.integers(0, 30),
                                              st.integers(0, 30), st.just(2100)))  # fmt: skip
ops = st.one_of(
    arrivals,
    arrivals,
    arrivals,
    polls,
    polls,
    st.tuples(st.just("first_token"), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("complete"), st.integers(0, 50)),
    st.tuples(st.just("cancel"), st.integers(0, 60)),
    st.tuples(st.just("reconfigure"), st.integers(0, 2)),
    st.tuples(st.just("engine"), st.integers(0, 6), st.integers(0, 3)),
)


@dataclass
class Queued:
    seq: int
    tier: str
    arrived: float
    prompt: int
    tokens: int


@dataclass
class Model:
    config: TierConfig
    queued: dict[str, Queued] = field(default_factory=dict)
    flight: dict[str, bool] = field(default_factory=dict)  # id -> still awaiting first token
    flight_tier: dict[str, str] = field(default_factory=dict)
    owed_home: dict[str, str] = field(default_factory=dict)  # starvation-bound releases' tiers
    limit: int = 1  # the dispatcher's awaiting limit during the poll being checked
    urgent_limit: int = 1  # the most urgent tier's during that poll
    outcome: dict[str, str] = field(default_factory=dict)
    seq: int = 0
    # Released requests' tiers and work (prompt + max tokens), the starvation bound's window.
    window: deque[tuple[str, int]] = field(default_factory=lambda: deque(maxlen=SHARE_WINDOW))
    sequences_seen: int | None = None  # most running reported while the engine queued
    backlog_at: float | None = None  # the last poll that found the most urgent tier backed up
    pressed_at: float | None = None  # the recovery reserve's hold runs from here
    lower_allowed: int | None = None  # `lower_cap` as of the poll being checked
    urgent_backed: bool = False  # the most urgent tier backed up at that poll's start
    feed: int | None = None  # its bound on its own awaiting while backed up (the dispatcher's)
    freed: list[float] = field(default_factory=list)  # when each released request ended
    # When the most urgent tier's requests were queued, per tier, while the reserve followed them.
    arrived: dict[str, list[float]] = field(default_factory=dict)
    standing: int = 0  # the standing reserve as of the poll being checked

    def standing_now(self, now: float) -> int:
        """`reserved_slots` (below max_in_flight); if it follows arrivals, at most one per
        arrival of the most urgent tier in the last RATE_WINDOW_S."""
        admission = self.config.scheduler.admission
        assert admission.max_in_flight is not None
        fixed = min(admission.reserved_slots, admission.max_in_flight - 1)
        if not admission.reserve_follows_arrivals:
            return fixed
        urgent = self.config.tiers_by_urgency()[0]
        recent = sum(1 for at in self.arrived.get(urgent, []) if at >= now - RATE_WINDOW_S)
        return min(fixed, recent)

    def sequences(self) -> int:
        cap = self.config.scheduler.admission.max_in_flight
        assert cap is not None
        return cap if self.sequences_seen is None else min(cap, self.sequences_seen)

    def recovery(self, now: float) -> int:
        """Sequences the recovery reserve keeps from the less urgent tiers now: ceil(share x
        sequences), at most sequences - 1, for the hold, then one fewer per RAMP_S."""
        admission = self.config.scheduler.admission
        hold = admission.recovery_hold_ms
        share = admission.recovery_reserve
        if share <= 0 or hold is None or self.pressed_at is None:
            return 0
        reserve = min(self.sequences() - 1, math.ceil(share * self.sequences()))
        past = now - self.pressed_at - hold / 1000.0
        if past > 0:
            reserve -= int(past // RAMP_S) + 1
        return max(0, reserve)

    def lower_cap(self, now: float) -> int | None:
        """The in-flight count under which a less urgent tier may take a slot while the
        recovery reserve holds (None: it does not)."""
        rec = self.recovery(now)
        return None if rec == 0 else self.sequences() - rec

    def group(self, tier: str, prompt: int) -> int:
        bounds = self.config.scheduler.queues[tier].length_groups
        return sum(1 for b in bounds if prompt > b)

    def pending(self, tier: str) -> list[Queued]:
        return [q for q in self.queued.values() if q.tier == tier]

    def ready(self, tier: str, now: float, skip: set[str] | frozenset[str] = frozenset()) -> bool:
        pending = [q for rid, q in self.queued.items() if q.tier == tier and rid not in skip]
        if not pending:
            return False
        queue = self.config.scheduler.queues[tier]
        adaptive = self.config.scheduler.adaptive
        wait = queue.max_waiting_time_ms / 1000.0
        if (
            adaptive.enabled
            and adaptive.tier == tier
            and len(pending) > adaptive.online_pressure_threshold
        ):
            wait = wait * adaptive.wait_time_reduction_ratio
        return (
            len(pending) >= queue.max_batch_size
            or sum(q.tokens for q in pending) >= queue.max_tokens_per_batch
            or now >= min(q.arrived for q in pending) + wait
        )

    def awaiting_upto(self, tier: str) -> int:
        """Awaiting requests counted against a release from `tier`: with the engine ordering
        by priority, only those of tiers at least as urgent."""
        queues = self.config.scheduler.queues
        if not self.config.scheduler.admission.pass_priority:
            return self.awaiting()
        if queues[tier].promote_after_ms is not None:  # held here while the engine is busy
            ahead = sum(
                1
                for rid, aw in self.flight.items()
                if aw and queues[self.flight_tier[rid]].priority < queues[tier].priority
            )
            return self.awaiting() if ahead == 0 else 10**9
        prio = queues[tier].priority
        return sum(
            1
            for rid, aw in self.flight.items()
            if aw and queues[self.flight_tier[rid]].priority <= prio
        )

    def eligible(self, tier: str, in_flight: int) -> bool:
        """May `tier` take a slot now, with `in_flight` taken?"""
        admission = self.config.scheduler.admission
        assert admission.max_in_flight is not None
        most_urgent = self.config.tiers_by_urgency()[0]
        cap = admission.max_in_flight - (0 if tier == most_urgent else self.standing)
        limit = self.urgent_limit if tier == most_urgent else self.limit
        if tier != most_urgent and self.lower_allowed is not None:
            cap = min(cap, self.lower_allowed)  # the recovery reserve holds
        return in_flight < cap and self.awaiting_upto(tier) < limit

    def timeout_ms(self, tier: str) -> float | None:
        own = self.config.scheduler.queues[tier].queue_timeout_ms
        return own if own is not None else self.config.scheduler.admission.shed_after_ms

    def step_up(self, tier: str) -> str:
        urgency = self.config.tiers_by_urgency()
        return urgency[urgency.index(tier) - 1]

    def aged(self, in_flight: int, pending: dict[str, list[Queued]], now: float) -> Queued | None:
        """The oldest request past its tier's age bound whose next more urgent tier has room."""
        queues = self.config.scheduler.queues
        due = [
            ps[0]
            for t, ps in pending.items()
            if ps
            and queues[t].promote_after_ms is not None
            and now >= ps[0].arrived + queues[t].promote_after_ms / 1000.0
            and self.eligible(self.step_up(t), in_flight)
        ]
        return min(due, key=lambda q: q.seq) if due else None

    def overloaded(self, pending: list[Queued], now: float) -> bool:
        """At a poll's start: the most urgent tier's oldest has waited over lifo_after_ms and
        its backlog is more than the engine clears in OVERLOAD_CLEAR_S at the rate it freed
        sequences over the last RATE_WINDOW_S."""
        lifo = self.config.scheduler.admission.lifo_after_ms
        if lifo is None or not pending or now - pending[0].arrived <= lifo / 1000.0:
            return False
        rate = sum(1 for at in self.freed if at >= now - RATE_WINDOW_S) / RATE_WINDOW_S
        return len(pending) > rate * OVERLOAD_CLEAR_S

    def backed_up(self, tier: str, pending: list[Queued], now: float) -> bool:
        """Newest first: the most urgent tier only, while overloaded as of the poll's start."""
        del now
        return tier == self.config.tiers_by_urgency()[0] and self.urgent_backed and bool(pending)

    def stale(self, tier: str, pending: list[Queued], now: float) -> bool:
        """The tier's oldest has waited over lifo_after_ms (any tier)."""
        lifo = self.config.scheduler.admission.lifo_after_ms
        return lifo is not None and bool(pending) and now - pending[0].arrived > lifo / 1000.0

    def demoted(self, q: Queued, pending: list[Queued], now: float) -> str | None:
        """The tier a stale request of a backed-up most urgent tier goes as (the next one),
        when the engine orders by priority; else None."""
        urgency = self.config.tiers_by_urgency()
        lifo = self.config.scheduler.admission.lifo_after_ms
        if (
            q.tier != urgency[0]
            or len(urgency) < 2
            or not self.config.scheduler.admission.pass_priority
            or lifo is None
            or not self.backed_up(q.tier, pending, now)
        ):
            return None
        if now - q.arrived > lifo / 1000.0:
            return urgency[1]
        # A fresh one too, once the tier's own awaiting has reached its feed.
        own = sum(1 for rid, aw in self.flight.items() if aw and self.flight_tier[rid] == q.tier)
        return urgency[1] if self.feed is not None and own >= self.feed else None

    def can_go(self, tier: str, in_flight: int, pending: list[Queued], now: float) -> bool:
        """May `tier`'s next request (newest while backed up) take a slot now?"""
        if pending and self.backed_up(tier, pending, now):
            newest = max(pending, key=lambda q: q.seq)
            down = self.demoted(newest, pending, now)
            if down is not None:
                return self.eligible(down, in_flight)
        return self.eligible(tier, in_flight)

    def share_eligible(self, tier: str, in_flight: int) -> bool:
        """Room for a starvation-bound release: the most urgent tier's slots (reserved ones
        included) and awaiting room (it goes to the engine as that tier's request)."""
        admission = self.config.scheduler.admission
        assert admission.max_in_flight is not None
        urgency = self.config.tiers_by_urgency()
        most_urgent = urgency[0]
        free = in_flight < admission.max_in_flight
        ahead = urgency[: urgency.index(tier)]
        if (
            ahead
            and not self.urgent_backed
            and self.lower_allowed is not None
            and in_flight >= self.lower_allowed
        ):
            return False  # the recovery reserve holds and online has no backlog
        return free and self.awaiting_upto(most_urgent) < self.urgent_limit

    def owed(self, in_flight: int, pending: dict[str, list[Queued]]) -> list[str]:
        """Tiers owed their minimum share now, most urgent first."""
        share = self.config.scheduler.admission.min_share
        if share <= 0:
            return []
        # One at a time: not while one of the tier's releases by the bound awaits its first token.
        paying = {self.owed_home[r] for r, aw in self.flight.items() if aw and r in self.owed_home}
        return [
            t
            for t in self.config.tiers_by_urgency()[1:]  # the most urgent tier is never owed
            if pending[t]
            and t not in paying
            and self.work(t) < share * sum(w for _, w in self.window)
            and self.share_eligible(t, in_flight)
        ]

    def work(self, tier: str) -> int:
        """`tier`'s engine work in the starvation bound's window."""
        return sum(w for t, w in self.window if t == tier)

    def awaiting(self) -> int:
        return sum(self.flight.values())


def check_poll(d: Dispatcher, m: Model, now: float) -> None:
    queues = m.config.scheduler.queues
    admission = m.config.scheduler.admission
    due = set()
    for rid, q in m.queued.items():
        timeout = m.timeout_ms(q.tier)
        if timeout is not None and q.arrived + timeout / 1000.0 <= now:
            due.add(rid)
    ready_before = {t for t in queues if m.ready(t, now, skip=due)}
    oldest_before = {
        t: min(
            (q.seq for rid, q in m.queued.items() if q.tier == t and rid not in due), default=None
        )
        for t in queues
    }
    in_flight_before = len(m.flight)
    urgent = m.config.tiers_by_urgency()[0]
    live = sorted((q for rid, q in m.queued.items() if q.tier == urgent and rid not in due),
                  key=lambda q: q.seq)  # fmt: skip
    m.urgent_backed = m.overloaded(live, now)
    if m.urgent_backed:
        m.backlog_at = m.pressed_at = now
    m.lower_allowed = m.lower_cap(now)
    m.standing = m.standing_now(now)
    limit = m.limit = d.max_awaiting
    fixed = admission.max_awaiting_first_token
    assert limit == fixed if fixed is not None else 1 <= limit <= admission.max_in_flight
    result = d.poll(now)
    m.urgent_limit = d.urgent_limit
    m.feed = d.urgent_feed
    adaptive_priority = admission.pass_priority and admission.max_awaiting_first_token is None
    if not (m.urgent_backed and adaptive_priority):
        assert m.feed is None, "a feed bound only on a backed-up urgent tier"
    assert m.feed is None or m.feed >= 1
    if not admission.pass_priority or admission.max_awaiting_first_token is not None:
        assert m.urgent_limit == limit
    else:
        assert limit <= m.urgent_limit <= admission.max_in_flight
    rejected = {r.id for r, _ in result.rejected}
    assert len(rejected) == len(result.rejected)
    assert rejected == due, "exactly the timed-out requests are rejected"
    assert all(j.reason == QUEUE_TIMEOUT and j.status == 503 for _, j in result.rejected)
    for rid in rejected:
        del m.queued[rid]
        m.outcome[rid] = "rejected"
    urgency = m.config.tiers_by_urgency()
    rank = {t: i for i, t in enumerate(urgency)}
    pending = {t: sorted(m.pending(t), key=lambda q: q.seq) for t in queues}
    promoted = set(result.promoted) | set(result.aged)
    assert promoted <= {r.id for r in result.released}
    assert not set(result.promoted) & set(result.aged)
    released: list[tuple[Queued, bool]] = []
    for i, r in enumerate(result.released):
        assert r.id in m.queued, "released once, and only what was queued"
        q = m.queued[r.id]
        in_flight = in_flight_before + i
        aged = m.aged(in_flight, pending, now)
        owed = m.owed(in_flight, pending)
        group = m.group(q.tier, q.prompt)
        same_group = [o for o in pending[q.tier] if m.group(o.tier, o.prompt) == group]
        counted = m.step_up(q.tier) if queues[q.tier].promote_after_ms is not None else q.tier
        if r.id in promoted:  # the age bound first, then the starvation bound
            if aged is not None:
                assert q is aged, f"{r.id} promoted while {aged} is the oldest past its age"
                assert q.seq == pending[q.tier][0].seq
                assert m.eligible(m.step_up(q.tier), in_flight)
            else:
                assert r.id in result.promoted
                assert owed and q.tier == owed[0], f"{r.id} promoted while {owed} owed"
                m.owed_home[r.id] = q.tier
                # Oldest first; newest first from a stale backlog (a client still waiting).
                stale = m.stale(q.tier, pending[q.tier], now)
                assert q.seq == (pending[q.tier][-1] if stale else pending[q.tier][0]).seq
                assert m.share_eligible(q.tier, in_flight)
                # Sent and counted as the most urgent tier's that waits here, if any does.
                waiting = [u for u in urgency[: rank[q.tier]] if pending[u]]
                if waiting:
                    counted = waiting[0]
        else:
            assert aged is None, f"{aged} past its age bound passed over by {r.id}"
            down = m.demoted(q, pending[q.tier], now)
            if down is not None:  # a stale request of a backed-up most urgent tier
                counted = down
            assert m.eligible(counted if down else q.tier, in_flight), (
                "reserved slots stay free for the most urgent"
            )
            assert set(owed) <= {q.tier}, f"owed tiers {owed} passed over by {q.tier}"
            # A more urgent tier held for its age bound (it may not take the slot now,
            # `eligible`) is passed over; one that may take it is not.
            more_urgent = urgency[: rank[q.tier]]
            if q.tier not in ready_before:  # work conservation: only if nothing more urgent
                assert not any(
                    pending[u] and m.can_go(u, in_flight, pending[u], now) for u in more_urgent
                )
            assert not any(
                m.ready(u, now) and m.can_go(u, in_flight, pending[u], now) for u in more_urgent
            ), f"ready tier passed over by {q.tier}"
            if m.backed_up(q.tier, pending[q.tier], now):  # newest first, per length group
                assert q.seq == max(o.seq for o in same_group)
                if q.tier not in {x.tier for x, _ in released}:
                    assert q.seq == max(o.seq for o in pending[q.tier])
            else:  # oldest first, per length group
                assert q.seq == min(o.seq for o in same_group)
                if q.tier not in {x.tier for x, _ in released}:
                    assert q.seq == oldest_before[q.tier]
        pending[q.tier].remove(q)
        m.window.append((q.tier, q.tokens))
        del m.queued[r.id]
        released.append((q, r.id in promoted))
        m.flight[r.id] = True
        if counted != q.tier:  # sent and counted as another tier's request
            assert result.sent_as[r.id] == counted
        else:
            assert r.id not in result.sent_as
        m.flight_tier[r.id] = counted
        m.outcome[r.id] = "released"
    if result.released:  # a lower cap from reconfigure holds releases until under it
        assert len(m.flight) <= admission.max_in_flight
        if not admission.pass_priority:
            assert m.awaiting() <= limit
    # Work conservation: a request is left waiting only when no slot is free for its tier.
    if m.queued and len(m.flight) < admission.max_in_flight:
        left = {t: sorted(m.pending(t), key=lambda q: q.seq) for t in queues}
        for q in m.queued.values():
            free = m.can_go(q.tier, len(m.flight), left[q.tier], now)
            assert not free, f"{q.tier} waits beside a free slot"
        assert m.aged(len(m.flight), left, now) is None, "a request past its age bound waits"
    held = any(queues[t].promote_after_ms is not None for t in queues) and admission.pass_priority
    for tier in queues:
        if m.ready(tier, now) and not held:  # passed over only by the starvation bound
            less_urgent = {t for t in queues if queues[t].priority > queues[tier].priority}
            assert not any(q.tier in less_urgent and not p for q, p in released), (
                f"ready tier {tier} passed over"
            )
    if result.next_wakeup is not None:
        assert result.next_wakeup > now
    # The standing reserve lapses with time alone: a waiting less urgent tier is polled by then.
    follows = admission.reserve_follows_arrivals
    if follows and m.standing and any(m.pending(t) for t in m.config.tiers_by_urgency()[1:]):
        recent = sorted(at for at in m.arrived[urgent] if at >= now - RATE_WINDOW_S)
        lapse = max(recent[len(recent) - m.standing] + RATE_WINDOW_S, math.nextafter(now, math.inf))
        assert result.next_wakeup is not None and result.next_wakeup <= lapse


def check_counts(d: Dispatcher, m: Model, now: float) -> None:
    stats = d.stats(now)
    assert stats.in_flight == len(m.flight) == d.in_flight
    assert stats.awaiting_first_token == m.awaiting()
    for name, tier in stats.tiers.items():
        assert tier.depth == len(m.pending(name))
        assert tier.in_flight >= 0 and tier.awaiting_first_token >= 0
    assert sum(t.in_flight for t in stats.tiers.values()) == len(m.flight)


# SCHED_EXAMPLES=2000 for a longer hunt; the default keeps the suite fast.
@settings(max_examples=int(os.environ.get("SCHED_EXAMPLES", "200")), deadline=None)
@given(
    cfgs=st.lists(configs(), min_size=2, max_size=3), steps=st.lists(ops, min_size=20, max_size=80)
)
def test_dispatcher_invariants(cfgs: list[TierConfig], steps: list[tuple[Any, ...]]) -> None:
    d = Dispatcher(cfgs[0])
    m = Model(cfgs[0])
    now = 0.0
    for step in steps:
        kind = step[0]
        flying = sorted(m.flight)
        if kind == "arrive":
            _, pick, prompt, max_tokens, dt = step
            # Mostly a tier of the current config; one pick in ten names any tier, maybe unknown.
            current = list(m.config.scheduler.queues)
            tier = NAMES[pick % 3] if pick == 9 else current[pick % len(current)]
            now += dt / 1000.0
            m.seq += 1
            rid = f"r{m.seq}"
            request = Request(rid, tier, prompt, max_tokens)
            if tier not in m.config.scheduler.queues:
                try:
                    d.arrive(request, now)
                except ValueError:
                    continue
                raise AssertionError("unknown tier accepted")
            depth_cap = m.config.scheduler.queues[tier].max_queue_depth
            refusal = d.arrive(request, now)
            if depth_cap is not None and len(m.pending(tier)) >= depth_cap:
                assert (
                    refusal is not None and refusal.reason == QUEUE_FULL and refusal.status == 429
                )
                assert refusal.retry_after_s is not None and refusal.retry_after_s > 0
                m.outcome[rid] = "refused"
            else:
                assert refusal is None
                m.queued[rid] = Queued(m.seq, tier, now, prompt, prompt + max_tokens)
                if (
                    m.config.scheduler.admission.reserve_follows_arrivals
                    and tier == m.config.tiers_by_urgency()[0]
                ):  # the only arrivals the standing reserve reads
                    m.arrived.setdefault(tier, []).append(now)
        elif kind == "poll":
            now += step[1] / 1000.0
            check_poll(d, m, now)
        elif kind == "first_token" and flying:
            rid = flying[step[1] % len(flying)]
            d.first_token(rid, now, timed=step[2])
            m.flight[rid] = False
        elif kind == "complete":
            rid = flying[step[1] % len(flying)] if flying else "nobody"
            assert d.complete(rid, now) is (rid in m.flight)
            if m.flight.pop(rid, None) is not None:
                m.freed.append(now)
        elif kind == "cancel":
            rid = f"r{step[1]}"
            expected = rid in m.queued or rid in m.flight
            assert d.cancel(rid, now) is expected
            if rid in m.queued:
                del m.queued[rid]
                m.outcome[rid] = "cancelled"
            if m.flight.pop(rid, None) is not None:
                m.freed.append(now)
        elif kind == "engine":
            _, running, waiting = step
            d.engine_waiting(waiting, now, running=running)
            if waiting > 0 and running > 0:
                seen = m.sequences_seen
                m.sequences_seen = running if seen is None else max(seen, running)
                urgent = m.config.tiers_by_urgency()[0]
                hold = m.config.scheduler.admission.recovery_hold_ms
                if (
                    any(aw and m.flight_tier[rid] == urgent for rid, aw in m.flight.items())
                    and m.backlog_at is not None
                    and hold is not None
                    and m.recovery(now) > 0
                    and now - m.backlog_at <= EXTEND_HOLDS * hold / 1000.0
                ):
                    m.pressed_at = now  # waits in the engine: extends the hold in force
        elif kind == "reconfigure":
            new = cfgs[step[1] % len(cfgs)]
            d.reconfigure(new, now)
            fallback = new.tiers_by_urgency()[-1]
            for q in m.queued.values():
                if q.tier not in new.scheduler.queues:
                    q.tier = fallback
            for rid, tier in m.flight_tier.items():
                if tier not in new.scheduler.queues:
                    m.flight_tier[rid] = fallback
            for rid, tier in m.owed_home.items():
                if tier not in new.scheduler.queues:
                    m.owed_home[rid] = fallback
            m.config = new
            m.arrived = {t: at for t, at in m.arrived.items() if t in new.scheduler.queues}
            for rid in m.queued:
                assert d.tier_of(rid) == m.queued[rid].tier
        check_counts(d, m, now)
    # Drain: with every slot handed back and time moving on, everything queued comes out.
    for _ in range(200):
        if not m.queued:
            break
        for rid in list(m.flight):
            assert d.complete(rid, now)
            del m.flight[rid]
            m.freed.append(now)
        now += 1.0
        check_poll(d, m, now)
    assert not m.queued
    admitted = [rid for rid, outcome in m.outcome.items() if outcome != "refused"]
    assert all(m.outcome[rid] in ("released", "rejected", "cancelled") for rid in admitted)
    check_counts(d, m, now)
