"""The tiered dispatcher (docs/architecture.md, "The dispatcher's semantics") as a pure state
machine fed with events and a clock.

Nothing here reads a clock or does I/O: every call takes `now` (float seconds, monotonic), so
the rules can be tested to the microsecond without sleeping.

`poll` applies the release rules of scheduler/selection.py (the age bound, the starvation
bound, readiness, work conservation; FIFO or adaptive LIFO within a tier) while a slot is free.
A queued request older than its queue's `queue_timeout_ms`, else `admission.shed_after_ms`, is
refused (503 + Retry-After). The queues' layout, chosen so that no decision costs time in
proportion to queue depth, is in scheduler/queues.py.

Its state is in objects it owns, one per concept: the tiers' queues (`backlog`,
scheduler/backlog.py), the released requests and their cap (`slots`, scheduler/slots.py), the
slots kept for the most urgent tier (`reserve`, scheduler/reserve.py), the limits on requests
awaiting their first token (`limits`, scheduler/awaiting.py) and the starvation bound's window
(`shares`, scheduler/selection.py); the rules that weigh several of them are
scheduler/rooms.py's.

Choices the design leaves open:
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

from scheduler.awaiting import AwaitingLimits
from scheduler.backlog import Backlog
from scheduler.config import DEFAULT_MAX_IN_FLIGHT, TierConfig
from scheduler.limiter import AwaitingLimit
from scheduler.queues import Flight, TierQueue
from scheduler.reserve import RecoveryReserve, Reserve
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
from scheduler.slots import Slots
from scheduler.stats import retry_after_s, scheduler_stats
from scheduler.types import QUEUE_FULL, PollResult, Rejection, Request, SchedulerStats


class Dispatcher:
    """Holds the backlog per tier and decides what reaches the engine and when."""

    def __init__(
        self, config: TierConfig, *, default_max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    ) -> None:
        self._default_max_in_flight = default_max_in_flight
        self.backlog = Backlog()
        self.slots = Slots()
        self.reserve = Reserve()
        self.limits = AwaitingLimits(default_max_in_flight)
        self.shares = ShareWindow()
        self.rooms = Rooms(self.backlog, self.slots, self.reserve, self.limits, self.shares)
        # The last releases (tier, at, size, tokens, padding), for stats.
        self._recent: deque[tuple[str, float, int, int, float]] = deque(maxlen=64)
        self._apply(config)

    # -- configuration --------------------------------------------------------------------

    def _apply(self, config: TierConfig) -> None:
        admission = config.scheduler.admission
        self.config = config
        cap = admission.max_in_flight
        max_in_flight = cap if cap is not None else max(1, self._default_max_in_flight)
        self.slots.max_in_flight = max_in_flight
        self.limits.configure(admission, max_in_flight)
        self.backlog.configure(config)
        self.reserve.configure(admission, max_in_flight, self.backlog.tiers)
        self.shares.min_share = float(admission.min_share)

    def reconfigure(
        self, config: TierConfig, now: float, *, default_max_in_flight: int | None = None
    ) -> None:
        """Switch to a new config without dropping any request (see the module docstring).
        `default_max_in_flight` replaces the cap used when the config sets none (the engine's
        max_num_seqs changed with a new launch profile)."""
        del now  # decisions under the new config happen at the next poll
        if default_max_in_flight is not None:
            if default_max_in_flight != self._default_max_in_flight:
                self.reserve.recovery.forget_engine()  # a new max_num_seqs: a new engine limit
            self._default_max_in_flight = default_max_in_flight
        self._apply(config)
        self.backlog.requeue()
        self.slots.rehome(self.backlog)

    def engine_policy(self, *, priority: bool) -> None:
        """The engine's scheduling policy, pushed by whoever learns it (the agent: from the
        launch flags, the engine's first refusal of `priority`, its coming back up): True,
        vLLM's priority policy; False, fcfs. With the config's `pass_priority` it makes
        `engine_priority`; a reconfigure keeps it (scheduler/awaiting.py)."""
        self.limits.engine_policy(priority=priority)

    # -- events -------------------------------------------------------------------------------

    def arrive(self, req: Request, now: float) -> Rejection | None:
        """Queue a request, or refuse it (429) when its tier's queue is full."""
        tier = self.backlog.tiers.get(req.tier)
        if tier is None:
            raise ValueError(f"unknown tier {req.tier!r}")
        if req.id in self.backlog.entries or req.id in self.slots.flights:
            raise ValueError(f"request id {req.id!r} is already held")
        if tier.max_depth is not None and tier.depth >= tier.max_depth:
            tier.rejections[QUEUE_FULL] = tier.rejections.get(QUEUE_FULL, 0) + 1
            detail = f"queue {tier.name} is full"
            return Rejection(QUEUE_FULL, 429, retry_after_s(tier, now), detail)
        self.backlog.queue(req, tier, now)
        self.reserve.arrived(tier, now)
        return None

    def first_token(self, req_id: str, now: float, *, timed: bool = True) -> None:
        """The engine produced the request's first token: it no longer waits in the engine.
        `timed` False (a non-streamed answer counted as started at once): no latency sample."""
        flight = self.slots.first_token(req_id)
        if flight is not None and timed:
            self.limits.limiter.sample(now - flight.released_at, now, flight.tier.name)

    def engine_waiting(self, count: int, now: float, *, running: int | None = None) -> None:
        """The engine's own waiting-queue length (vLLM's `num_requests_waiting`), when known,
        and its running count (`num_requests_running`): together they show its sequence limit
        (scheduler/reserve.py)."""
        self.limits.limiter.engine_waiting(count, now)
        if running is not None:
            recovery = self.reserve.recovery
            recovery.engine_reading(running, count)
            if count > 0 and running > 0 and self.backlog.order and self.backlog.urgent.awaiting:
                # Every sequence taken and a most urgent request waiting for one.
                recovery.waited_in_engine(now, self.slots.max_in_flight)

    def complete(self, req_id: str, now: float) -> bool:
        """A released request finished; its slot is free. False when it was not in flight."""
        return self.slots.complete(req_id, now)

    def cancel(self, req_id: str, now: float) -> bool:
        """The client left: drop a queued request or free a released one's slot. Never raises."""
        return self.backlog.cancel(req_id) or self.slots.complete(req_id, now)

    # -- decisions ------------------------------------------------------------------------

    def poll(self, now: float) -> PollResult:
        """Reject timed-out requests, release what the rules allow, say when to look again."""
        rejected: list[tuple[Request, Rejection]] = []
        released: list[Request] = []
        promoted: list[str] = []
        aged_ids: list[str] = []
        sent_as: dict[str, str] = {}
        backlog, slots, limits, rooms = self.backlog, self.slots, self.limits, self.rooms
        order = backlog.order
        backlog.expire(now, rejected)
        overload = rooms.urgent_overloaded(now)
        if overload:
            self.reserve.recovery.backed_up(now)
        limits.at_poll(order, overload, slots.max_in_flight, now)
        self.reserve.at_poll(order, slots.max_in_flight, now)
        queued = backlog.entries
        flights = slots.flights
        cap = slots.max_in_flight
        has_room = rooms.has_room
        stuck: set[TierQueue] = set()  # tiers whose release found nothing it may send now
        while queued and len(flights) < cap:
            aged = aged_tier(order, now, has_room)
            if aged is not None:
                self._release(aged, 1, now, released, sent_as)
                aged_ids.append(released[-1].id)
                continue
            owed = rooms.owed_tier()
            if owed is not None:
                # Counted as `share_counted` says (room: `Rooms.share_room`); newest first from
                # a stale backlog (a live client).
                counted = share_counted(order, owed)
                lifo = owed.stale(now)
                self._release(
                    owed, 1, now, released, sent_as, lifo=lifo, counted=counted, owed=True
                )
                promoted.append(released[-1].id)
                continue
            free = has_room if not stuck else lambda t: t not in stuck and has_room(t)
            chosen = chosen_tier(order, now, free)
            if chosen is None:
                break  # only reserved slots are left and only less urgent tiers wait
            room = rooms.room(chosen)
            if chosen.promote_s is not None and limits.engine_priority:
                # Its first release counts one tier up, which holds the rest of it
                # (selection.awaiting_upto): one at a time, as the rule says.
                room = min(room, 1)
            before = len(released)
            lifo = not chosen.rank and limits.overload
            self._release(chosen, room, now, released, sent_as, lifo=lifo)
            if len(released) == before:
                # Only stale requests of the most urgent tier, and no room one tier down: the
                # slot goes to the next tier that may take it (work conservation).
                stuck.add(chosen)
        if any(rooms.held_by_limit(t) for t in order):
            limits.limiter.held_back()  # something waits and only the awaiting limit stops it
        wakeup = next_wakeup(order, now)
        lapse = self.reserve.lapse(order, now)
        if lapse is not None and (wakeup is None or lapse < wakeup):
            wakeup = lapse
        return PollResult(released, rejected, wakeup, promoted, aged_ids, sent_as)

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
        awaiting of `counted` and goes to the engine as its request (`sent_as`)."""
        order = release_order(tier, lifo)
        backlog, slots, rooms = self.backlog, self.slots, self.rooms
        queued = backlog.entries
        flights = slots.flights
        waits = tier.waits
        shares = self.shares
        # Backed up, the most urgent tier's stale requests go as the next tier's.
        demote = (
            demoted_tier(backlog.order, tier, self.limits.engine_priority)
            if lifo and not counted
            else None
        )
        if counted is None:
            counted = counted_tier(backlog.order, tier)
        stale_s = tier.lifo_s if tier.lifo_s is not None else 0.0
        feed = self.limits.feed  # beyond it, fresh ones go as the next tier's too
        home = counted
        share_rule = shares.min_share > 0
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
                if taken and share_rule and rooms.owed_tier(besides=tier) is not None:
                    full = True  # another tier is owed its share: it goes next
                    break
                counted = home
                if demote is not None and (
                    now - entry.arrived > stale_s or (feed is not None and home.awaiting >= feed)
                ):
                    if not rooms.has_room(demote):
                        full = True  # no room one tier down for what is left (newest first)
                        break
                    counted = demote
                dq.pop() if lifo else dq.popleft()
                del queued[entry.req.id]
                tier.taken(entry)
                req = entry.req
                flights[req.id] = Flight(req, tier, now, counted, owed)
                tier.owed_awaiting += owed
                if counted is not tier:
                    sent_as[req.id] = counted.name
                out.append(req)
                waits.append(now - entry.arrived)
                shares.count(tier.name, entry.tokens)
                slots.awaiting += 1
                counted.awaiting += 1
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
        entry = self.backlog.entries.get(req_id)
        if entry is not None:
            return entry.tier.name
        flight = self.slots.flights.get(req_id)
        return flight.tier.name if flight is not None else None

    def is_queued(self, req_id: str) -> bool:
        return req_id in self.backlog.entries

    def is_in_flight(self, req_id: str) -> bool:
        return req_id in self.slots.flights

    @property
    def in_flight(self) -> int:
        return len(self.slots.flights)

    @property
    def awaiting_first_token(self) -> int:
        return self.slots.awaiting

    @property
    def queued(self) -> int:
        """Requests held in the gateway's queues, all tiers."""
        return len(self.backlog.entries)

    @property
    def max_in_flight(self) -> int:
        """The cap on requests in flight in force (the config's, else the caller's default)."""
        return self.slots.max_in_flight

    @property
    def engine_priority(self) -> bool:
        """The engine orders its queue by the `priority` the gateway sends (the config's
        `pass_priority` and the engine's policy, `engine_policy`)."""
        return self.limits.engine_priority

    @property
    def limiter(self) -> AwaitingLimit:
        """The awaiting-first-token limit (scheduler/limiter.py)."""
        return self.limits.limiter

    @property
    def recovery(self) -> RecoveryReserve:
        """The recovery reserve (scheduler/reserve.py)."""
        return self.reserve.recovery

    @property
    def most_urgent(self) -> str:
        return self.backlog.urgent.name

    @property
    def urgent_limit(self) -> int:
        """The most urgent tier's awaiting limit in the last poll (`AwaitingLimits.limit_for`)."""
        return self.limits.urgent_limit

    @property
    def urgent_feed(self) -> int | None:
        """The overloaded most urgent tier's bound on its own awaiting in the last poll."""
        return self.limits.feed

    @property
    def max_awaiting(self) -> int:
        """The current limit on released requests awaiting their first token."""
        return self.limits.limiter.value

    def stats(self, now: float) -> SchedulerStats:
        max_in_flight = self.slots.max_in_flight
        return scheduler_stats(
            now,
            self.backlog.order,
            in_flight=len(self.slots.flights),
            awaiting=self.slots.awaiting,
            max_in_flight=max_in_flight,
            max_awaiting=self.max_awaiting,
            reserved=self.reserve.reserved_now(max_in_flight),
            recent=list(self._recent),
            shares=self.shares.counts,
            work=self.shares.work,
            limiter=self.limits.limiter,
            feed=self.limits.feed,
            sequences=self.reserve.recovery.sequences_seen,
        )
