"""The tiered dispatcher (DESIGN.md 3.2) as a pure state machine fed with events and a clock.

Nothing here reads a clock or does I/O: every call takes `now` (float seconds, monotonic), so
the rules can be tested to the microsecond without sleeping.

`poll` applies the release rules of scheduler/selection.py (the age bound, the starvation
bound, readiness, work conservation; FIFO or adaptive LIFO within a tier) while a slot is free.
A queued request older than its queue's `queue_timeout_ms`, else `admission.shed_after_ms`, is
refused (503 + Retry-After). The queues' layout, chosen so that no decision costs time in
proportion to queue depth, is in scheduler/queues.py.

Choices where DESIGN.md is silent:
- tokens of a request (readiness and the per-release cap) = prompt_tokens + max_tokens;
- a release takes the oldest request's length group first, in FIFO order, then the other groups
  by the age of their heads; it stops at the first request that would overflow
  `max_tokens_per_batch` (never skipping one, to keep FIFO), except that a release always takes
  at least one request, so an oversize request goes alone;
- `reconfigure` keeps every queued and in-flight request with its arrival time; those of a
  removed tier move to the least urgent remaining tier (`tier_of` says where a request is now).
  A lower `max_in_flight` releases nothing until in-flight falls under it; a lower
  `max_queue_depth` refuses only new arrivals;
- `reserved_slots` is clamped below `max_in_flight` when the cap comes from the caller's default;
- counters (released, rejections, waits) of a tier removed by `reconfigure` are dropped;
- the queue-timeout check is inclusive: a request that has waited exactly `queue_timeout_ms`
  is rejected, and a tier whose oldest request has waited exactly the effective wait is ready.
"""

from __future__ import annotations

from collections import deque

from scheduler.config import DEFAULT_MAX_IN_FLIGHT, TierConfig
from scheduler.limiter import AwaitingLimit, RecentEvents
from scheduler.queues import SWEEP_MIN_DEAD, Entry, Flight, TierQueue
from scheduler.reserve import RecoveryReserve
from scheduler.rooms import Rooms
from scheduler.selection import SHARE_WINDOW as SHARE_WINDOW  # re-exported for the tests
from scheduler.selection import (
    ShareWindow,
    aged_tier,
    chosen_tier,
    counted_tier,
    demoted_tier,
    next_wakeup,
    release_order,
    share_counted,
)
from scheduler.stats import retry_after_s, scheduler_stats
from scheduler.types import (
    QUEUE_FULL,
    QUEUE_TIMEOUT,
    PollResult,
    Rejection,
    Request,
    SchedulerStats,
)


class Dispatcher(Rooms):
    """Holds the backlog per tier and decides what reaches the engine and when."""

    def __init__(
        self, config: TierConfig, *, default_max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    ) -> None:
        self._default_max_in_flight = default_max_in_flight
        self._queued: dict[str, Entry] = {}
        self._flight: dict[str, Flight] = {}
        self._awaiting = 0
        self._seq = 0
        self._recent: deque[tuple[str, float, int, int, float]] = deque(maxlen=64)
        self._tiers: dict[str, TierQueue] = {}
        self._order: list[TierQueue] = []
        self._shares = ShareWindow()
        self._limit = 1  # the awaiting limit of the poll in progress
        self._urgent_limit = 1  # the most urgent tier's (see `_limit_for`)
        self.limiter = AwaitingLimit(None, self._default_max_in_flight)
        self.recovery = RecoveryReserve(0.0, None)
        self._recovery_cap: int | None = None  # in-flight cap of the less urgent tiers, if any
        self._urgent_overload = False
        self._freed = RecentEvents()
        self._arrivals: dict[str, RecentEvents] = {}
        self._standing = 0
        self._feed: int | None = None
        self._apply(config)

    # -- configuration --------------------------------------------------------------------

    def _apply(self, config: TierConfig) -> None:
        admission = config.scheduler.admission
        self.config = config
        cap = admission.max_in_flight
        self.max_in_flight = cap if cap is not None else max(1, self._default_max_in_flight)
        self.limiter.fixed = admission.max_awaiting_first_token
        self.limiter.set_ceiling(self.max_in_flight)
        self.reserved = min(admission.reserved_slots, self.max_in_flight - 1)
        self.reserve_follows = admission.reserve_follows_arrivals
        self.reserve_caps_lower = admission.reserve_caps_lower_tiers
        hold = admission.recovery_hold_ms
        self.recovery.configure(
            float(admission.recovery_reserve), None if hold is None else hold / 1000.0
        )
        self.min_share = float(admission.min_share)
        # vLLM's priority queue orders what waits inside the engine: a less urgent request
        # awaiting its first token there does not delay a more urgent one, so it does not count
        # against the more urgent tier's awaiting limit (the agent turns this off when the
        # engine refuses `priority`).
        self.engine_priority = admission.pass_priority
        tiers: dict[str, TierQueue] = {}
        for rank, name in enumerate(config.tiers_by_urgency()):
            old = self._tiers.get(name)
            if old is not None:
                old.rank = rank
                old.configure(config, rank)
                tiers[name] = old
            else:
                tiers[name] = TierQueue(name, config, rank)
        self._tiers = tiers
        self._order = list(tiers.values())
        self._arrivals = {name: got for name, got in self._arrivals.items() if name in tiers}

    def reconfigure(
        self, config: TierConfig, now: float, *, default_max_in_flight: int | None = None
    ) -> None:
        """Switch to a new config without dropping any request (see the module docstring).
        `default_max_in_flight` replaces the cap used when the config sets none (the engine's
        max_num_seqs changed with a new launch profile)."""
        del now  # decisions under the new config happen at the next poll
        if default_max_in_flight is not None:
            if default_max_in_flight != self._default_max_in_flight:
                self.recovery.forget_engine()  # a new max_num_seqs: a new engine limit
            self._default_max_in_flight = default_max_in_flight
        self._apply(config)
        fallback = self._order[-1]
        entries = sorted(self._queued.values(), key=lambda e: e.seq)
        for tier in self._order:
            tier.groups = [deque() for _ in range(len(tier.bounds) + 1)]
            tier.dead = tier.depth = tier.queued_tokens = tier.in_flight = tier.awaiting = 0
            tier.sent_as_own = 0
            tier.owed_awaiting = 0
        for entry in entries:
            entry.tier = self._tiers.get(entry.tier.name, fallback)
            entry.tier.put(entry)
        for flight in self._flight.values():
            flight.tier = self._tiers.get(flight.tier.name, fallback)
            flight.counted = self._tiers.get(flight.counted.name, fallback)
            flight.tier.in_flight += 1
            flight.counted.awaiting += flight.awaiting
            flight.tier.sent_as_own += flight.counted is flight.tier
            flight.tier.owed_awaiting += flight.owed and flight.awaiting

    # -- events -------------------------------------------------------------------------------

    def arrive(self, req: Request, now: float) -> Rejection | None:
        """Queue a request, or refuse it (429) when its tier's queue is full."""
        tier = self._tiers.get(req.tier)
        if tier is None:
            raise ValueError(f"unknown tier {req.tier!r}")
        if req.id in self._queued or req.id in self._flight:
            raise ValueError(f"request id {req.id!r} is already held")
        if tier.max_depth is not None and tier.depth >= tier.max_depth:
            tier.rejections[QUEUE_FULL] = tier.rejections.get(QUEUE_FULL, 0) + 1
            detail = f"queue {tier.name} is full"
            return Rejection(QUEUE_FULL, 429, retry_after_s(tier, now), detail)
        self._seq += 1
        entry = Entry(req, now, self._seq, tier)
        tier.put(entry)
        self._queued[req.id] = entry
        if self.reserve_follows and not tier.rank:  # only the standing reserve reads them
            self._arrivals.setdefault(tier.name, RecentEvents()).add(now)
        return None

    def first_token(self, req_id: str, now: float, *, timed: bool = True) -> None:
        """The engine produced the request's first token: it no longer waits in the engine.
        `timed` False (a non-streamed answer counted as started at once): no latency sample."""
        flight = self._flight.get(req_id)
        if flight is not None and flight.awaiting:
            flight.settle()
            self._awaiting -= 1
            if timed:
                self.limiter.sample(now - flight.released_at, now, flight.tier.name)

    def engine_waiting(self, count: int, now: float, *, running: int | None = None) -> None:
        """The engine's own waiting-queue length (vLLM's `num_requests_waiting`), when known,
        and its running count (`num_requests_running`): together they show its sequence limit
        (scheduler/reserve.py)."""
        self.limiter.engine_waiting(count, now)
        if running is not None:
            self.recovery.engine_reading(running, count)
            if count > 0 and running > 0 and self._order and self._order[0].awaiting:
                # Every sequence taken and a most urgent request waiting for one.
                self.recovery.waited_in_engine(now, self.max_in_flight)

    @property
    def most_urgent(self) -> str:
        return self._order[0].name

    @property
    def urgent_limit(self) -> int:
        """The most urgent tier's awaiting limit in the last poll (see `_limit_for`)."""
        return self._urgent_limit

    @property
    def urgent_feed(self) -> int | None:
        """The overloaded most urgent tier's bound on its own awaiting in the last poll."""
        return self._feed

    @property
    def max_awaiting(self) -> int:
        """The current limit on released requests awaiting their first token."""
        return self.limiter.value

    def complete(self, req_id: str, now: float) -> bool:
        """A released request finished; its slot is free. False when it was not in flight."""
        flight = self._flight.pop(req_id, None)
        if flight is None:
            return False
        flight.tier.in_flight -= 1
        flight.tier.sent_as_own -= flight.counted is flight.tier
        self._freed.add(now)
        if flight.awaiting:
            flight.settle()
            self._awaiting -= 1
        return True

    def cancel(self, req_id: str, now: float) -> bool:
        """The client left: drop a queued request or free a released one's slot. Never raises."""
        entry = self._queued.pop(req_id, None)
        if entry is None:
            return self.complete(req_id, now)
        tier = entry.tier
        entry.alive = False
        tier.taken(entry)
        tier.dead += 1
        tier.cancelled += 1
        if tier.dead > SWEEP_MIN_DEAD and tier.dead > tier.depth:
            tier.sweep()
        return True

    # -- decisions ------------------------------------------------------------------------

    def poll(self, now: float) -> PollResult:
        """Reject timed-out requests, release what the rules allow, say when to look again."""
        rejected: list[tuple[Request, Rejection]] = []
        released: list[Request] = []
        promoted: list[str] = []
        aged_ids: list[str] = []
        sent_as: dict[str, str] = {}
        for tier in self._order:
            if tier.timeout_s is not None and tier.depth:
                self._expire(tier, now, rejected)
        flight = self._flight
        self._urgent_overload = self._urgent_overloaded(now)
        if self._urgent_overload:
            self.recovery.backed_up(now)
        self._feed = self._feed_now(now)
        self._recovery_cap = self.recovery.lower_cap(self.max_in_flight, now)
        self._standing = self._standing_now(now)
        self._limit = self.limiter.value
        self._urgent_limit = self._limit
        if self.engine_priority and self._order and self.limiter.adaptive:
            extra = self._urgent_allowance(now)
            self._urgent_limit = max(self._limit, min(self.max_in_flight, self._limit + extra))
        stuck: set[TierQueue] = set()  # tiers whose release found nothing it may send now
        while self._queued and len(flight) < self.max_in_flight:
            aged = aged_tier(self._order, now, self._has_room)
            if aged is not None:
                self._release(aged, 1, now, released, sent_as)
                aged_ids.append(released[-1].id)
                continue
            owed = self._owed_tier()
            if owed is not None:
                # Counted as `share_counted` says (room: `_share_room`); newest first from a
                # stale backlog (a live client).
                counted = share_counted(self._order, owed)
                lifo = owed.stale(now)
                self._release(
                    owed, 1, now, released, sent_as, lifo=lifo, counted=counted, owed=True
                )
                promoted.append(released[-1].id)
                continue
            has_room = (
                self._has_room if not stuck else lambda t: t not in stuck and self._has_room(t)
            )
            chosen = chosen_tier(self._order, now, has_room)
            if chosen is None:
                break  # only reserved slots are left and only less urgent tiers wait
            awaiting_room = self._limit_for(chosen) - self._awaiting_upto(chosen)
            slots = self._slot_room(chosen)
            room = min(slots, self._lower_room(chosen), awaiting_room, chosen.max_batch)
            if chosen.promote_s is not None and self.engine_priority:
                # Its first release counts one tier up, which holds the rest of it
                # (selection.awaiting_upto): one at a time, as the rule says.
                room = min(room, 1)
            before = len(released)
            lifo = not chosen.rank and self._urgent_overload
            self._release(chosen, room, now, released, sent_as, lifo=lifo)
            if len(released) == before:
                # Only stale requests of the most urgent tier, and no room one tier down: the
                # slot goes to the next tier that may take it (work conservation).
                stuck.add(chosen)
        if any(self._held_by_limit(t) for t in self._order):
            self.limiter.held_back()  # something waits and only the awaiting limit stops it
        wakeup = next_wakeup(self._order, now)
        lapse = self._standing_lapse(now)
        if lapse is not None and (wakeup is None or lapse < wakeup):
            wakeup = lapse
        return PollResult(released, rejected, wakeup, promoted, aged_ids, sent_as)

    def _expire(self, tier: TierQueue, now: float, out: list[tuple[Request, Rejection]]) -> None:
        for entry in tier.pop_expired(now):
            del self._queued[entry.req.id]
            detail = f"waited over {tier.timeout_s:g} s in queue {tier.name}"
            out.append((entry.req, Rejection(QUEUE_TIMEOUT, 503, retry_after_s(tier, now), detail)))

    def _release(
        self,
        tier: TierQueue,
        room: int,
        now: float,
        out: list[Request],
        sent_as: dict[str, str],
        *,
        lifo: bool = False,
        counted: TierQueue | None = None,
        owed: bool = False,
    ) -> None:
        """Release up to `room` of `tier`'s requests: oldest first, or with `lifo` (the tier is
        overloaded) newest first, the newest request's length group first. Each counts in the
        awaiting of `counted` and goes to the engine as its request (see `_counted`)."""
        order = release_order(tier, lifo)
        flight = self._flight
        waits = tier.waits
        # Backed up, the most urgent tier's stale requests go as the next tier's.
        demote = (
            demoted_tier(self._order, tier, self.engine_priority) if lifo and not counted else None
        )
        if counted is None:
            counted = counted_tier(self._order, tier)
        stale_s = tier.lifo_s if tier.lifo_s is not None else 0.0
        feed = self._feed  # beyond it, fresh ones go as the next tier's too
        home = counted
        share_rule = self.min_share > 0
        taken = 0
        tokens = 0
        longest = 0
        prompt_sum = 0
        full = False
        for dq in order:
            while dq and taken < room:
                entry = dq[-1] if lifo else dq[0]
                if not entry.alive:
                    dq.pop() if lifo else dq.popleft()
                    tier.dead -= 1
                    continue
                if taken and tokens + entry.tokens > tier.max_tokens:
                    full = True
                    break
                if taken and share_rule and self._owed_tier(besides=tier) is not None:
                    full = True  # another tier is owed its share: it goes next
                    break
                counted = home
                if demote is not None and (
                    now - entry.arrived > stale_s or (feed is not None and home.awaiting >= feed)
                ):
                    if not self._has_room(demote):
                        full = True  # no room one tier down for what is left (newest first)
                        break
                    counted = demote
                dq.pop() if lifo else dq.popleft()
                del self._queued[entry.req.id]
                tier.taken(entry)
                req = entry.req
                flight[req.id] = Flight(req, tier, now, counted, owed)
                tier.owed_awaiting += owed
                if counted is not tier:
                    sent_as[req.id] = counted.name
                out.append(req)
                waits.append(now - entry.arrived)
                self._shares.count(tier.name, entry.tokens)
                self._awaiting += 1
                counted.awaiting += 1
                tier.sent_as_own += counted is tier
                taken += 1
                tokens += entry.tokens
                prompt_sum += req.prompt_tokens
                if req.prompt_tokens > longest:
                    longest = req.prompt_tokens
            if full or taken >= room:
                break
        if not taken:
            return  # nothing it may send now: not a release (no record, no drain rate)
        tier.in_flight += taken
        padding = 1.0 - prompt_sum / (taken * longest) if longest else 0.0
        tier.record_release(now, taken, padding)
        self._recent.append((tier.name, now, taken, tokens, padding))

    # -- queries --------------------------------------------------------------------------

    def tier_of(self, req_id: str) -> str | None:
        """The tier a held request belongs to now (it may have moved on reconfigure)."""
        entry = self._queued.get(req_id)
        if entry is not None:
            return entry.tier.name
        flight = self._flight.get(req_id)
        return flight.tier.name if flight is not None else None

    def is_queued(self, req_id: str) -> bool:
        return req_id in self._queued

    def is_in_flight(self, req_id: str) -> bool:
        return req_id in self._flight

    @property
    def in_flight(self) -> int:
        return len(self._flight)

    @property
    def awaiting_first_token(self) -> int:
        return self._awaiting

    @property
    def queued(self) -> int:
        """Requests held in the gateway's queues, all tiers."""
        return len(self._queued)

    def stats(self, now: float) -> SchedulerStats:
        return scheduler_stats(
            now,
            self._order,
            in_flight=len(self._flight),
            awaiting=self._awaiting,
            max_in_flight=self.max_in_flight,
            max_awaiting=self.max_awaiting,
            reserved=self._reserved_now(),
            recent=list(self._recent),
            shares=self._shares.counts,
            work=self._shares.work,
            limiter=self.limiter,
            feed=self._feed,
            sequences=self.recovery.sequences_seen,
        )
