"""Room rules of the dispatcher (scheduler/dispatcher.py): which tier may take a free slot now.

A mixin over the dispatcher's state, kept apart so that each rule reads on its own: the slot
caps (`max_in_flight`, `reserved_slots`, the recovery reserve of scheduler/reserve.py), the
awaiting limit per tier (the most urgent tier's allowance, scheduler/limiter.py), and the room
of a starvation-bound release, and the spill of a backed-up most urgent tier. Pure: every
input is the dispatcher's state or `now`.
"""

from __future__ import annotations

from scheduler.limiter import AwaitingLimit
from scheduler.queues import Flight, TierQueue
from scheduler.selection import ShareWindow, awaiting_upto, owed_tier, release_order
from scheduler.types import Request


class Rooms:
    """The room rules; the state is the dispatcher's (set in its __init__ and _apply)."""

    _flight: dict[str, Flight]
    _order: list[TierQueue]
    _awaiting: int
    _limit: int
    _urgent_limit: int
    _recovery_cap: int | None
    _urgent_backed_up: bool  # the most urgent tier was backed up at the poll's start
    _feed: int | None  # its awaiting in the engine while backed up (`_release`), if any
    _shares: ShareWindow
    max_in_flight: int
    reserved: int
    min_share: float
    engine_priority: bool
    limiter: AwaitingLimit

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
    ) -> None:
        raise NotImplementedError  # the dispatcher's (scheduler/dispatcher.py)

    def _cap(self, tier: TierQueue) -> int:
        """The in-flight count under which `tier` may take a slot: the less urgent tiers leave
        the last `reserved_slots` to the most urgent."""
        return self.max_in_flight - self.reserved if tier.rank else self.max_in_flight

    def _lower_room(self, tier: TierQueue) -> int:
        """Slots a less urgent `tier` may still take while the recovery reserve holds: under
        its cap on the in-flight count (scheduler/reserve.py)."""
        cap = self._recovery_cap
        if not tier.rank or cap is None:
            return self.max_in_flight
        return max(0, cap - len(self._flight))

    def _has_room(self, tier: TierQueue) -> bool:
        return (
            len(self._flight) < self._cap(tier)
            and self._lower_room(tier) > 0
            and self._awaiting_upto(tier) < self._limit_for(tier)
        )

    def _limit_for(self, tier: TierQueue) -> int:
        """The awaiting limit of `tier`'s release. The most urgent tier, in an engine ordering
        by priority, loses nothing by waiting there rather than here (it goes first in both,
        FIFO), so it has `_urgent_allowance` on top: only a backlog beyond that stays here."""
        return self._urgent_limit if tier.rank == 0 else self._limit

    def _urgent_allowance(self, now: float) -> int:
        """The most urgent tier's awaiting on top of the limit (priority engine, adaptive):
        half a second of its first tokens, unless backed up (the engine's FIFO share of the
        backlog would delay the newest, which LIFO releases first); plus each less urgent
        request awaiting its first token: the engine gives a freed slot to an urgent request
        ahead of those, and an urgent request held here lets them take it instead."""
        urgent = self._order[0]
        drain = 0 if urgent.backed_up(now) else self.limiter.drain_allowance(urgent.name, now)
        return drain + sum(tier.awaiting for tier in self._order[1:])

    def _feed_now(self, now: float) -> int | None:
        """While the most urgent tier is backed up (engine ordering by priority, adaptive
        limit): how many of its requests may await their first token in the engine as its own,
        the limiter's `feed` (what the engine starts next). The gateway serves that backlog
        newest first, the engine its queue oldest first within a priority: each urgent
        request waiting there is one more that a request sent now waits behind. Beyond it
        the newest wait here, and `Dispatcher._spill` keeps the engine busy with the oldest
        (stale) ones as the next tier's. None: no bound."""
        if len(self._order) < 2 or not (
            self._urgent_backed_up and self.engine_priority and self.limiter.adaptive
        ):
            return None
        return self.limiter.feed(self._order[0].name, now)

    def _held_by_limit(self, tier: TierQueue, now: float) -> bool:
        """`tier` holds requests that only the awaiting limit keeps here (the limiter grows
        then). A backed-up most urgent tier (`_feed` set): with its feed full it sends more
        only by `_spill`, which only the limit bounds, if its oldest is stale; else a stale
        newest goes in the next tier's room, held by the limit only if that tier's slots
        (the recovery reserve included) would take it."""
        flight = len(self._flight)
        if not (tier.depth and flight < self._cap(tier) and self._lower_room(tier)):
            return False
        feed = self._feed
        if tier.rank or feed is None:
            return True
        stale_s = tier.lifo_s or 0.0
        if tier.awaiting >= feed:
            oldest = tier.oldest()
            return oldest is not None and now - oldest.arrived > stale_s
        groups = release_order(tier, True)
        if not groups or now - groups[0][-1].arrived <= stale_s:
            return True  # a fresh newest: the tier's own limit holds it
        down = self._order[1]
        return flight < self._cap(down) and self._lower_room(down) > 0

    def _spill_room(self, down: TierQueue) -> bool:
        """Room for a stale request of the backed-up most urgent tier sent by `_spill` as
        `down`'s: a free slot, and room under the awaiting limit as `down` counts it. Neither
        `reserved_slots` nor the recovery reserve applies: it is the most urgent tier's work
        during its overload, at a lower engine priority only so that what is sent after it
        passes it. (Held to the feed alone, that tier was throttled to its feed per first-token
        time, Little's law, as by the fixed awaiting cap once: vLLM ran 12 of 16 sequences in a
        shared-core overload.)"""
        return len(self._flight) < self.max_in_flight and self._awaiting_upto(down) < self._limit

    def _awaiting_upto(self, tier: TierQueue) -> int:
        return awaiting_upto(self._order, tier, self._awaiting, self.engine_priority)

    def _reserved_now(self) -> int:
        """Slots the less urgent tiers leave to the most urgent (as of the last poll)."""
        cap = self._recovery_cap
        return self.reserved if cap is None else max(self.reserved, self.max_in_flight - cap)

    def _share_room(self, tier: TierQueue) -> bool:
        """Room for a starvation-bound release of `tier`: the most urgent tier's, as whose
        request the engine sees it (its awaiting room, and the reserved slots too: else a
        most urgent tier that fills every other slot would starve the rest again)."""
        urgent = self._order[0]
        free = len(self._flight) < self.max_in_flight
        if not self._lower_room(tier) and not self._urgent_backed_up:
            # The recovery reserve holds and the most urgent tier has no backlog (at most a
            # request that just arrived, which this poll releases): the share waits for the
            # reserve's room like any less urgent release. Only the overload itself (a backed-up
            # most urgent tier) lets it pass.
            return False
        return free and self._awaiting_upto(urgent) < self._limit_for(urgent)

    def _owed_tier(self, besides: TierQueue | None = None) -> TierQueue | None:
        return owed_tier(self._order, self._shares, self.min_share, self._share_room, besides)

    def _spill(self, now: float, out: list[Request], sent_as: dict[str, str]) -> bool:
        """While the backed-up most urgent tier's feed is full, its oldest stale request goes
        to the engine as the next tier's, in `_spill_room`: the engine stays busy with the
        backlog (at that tier's priority, behind anything sent after it) while the newest wait
        here for the feed. Once the feed has room (the overload is over) this stops, and the
        stale backlog has only the next tier's room (the recovery reserve applies)."""
        urgent, down = self._order[0], self._order[1]
        feed = self._feed
        if feed is None or urgent.awaiting < feed or not self._spill_room(down):
            return False
        oldest = urgent.oldest()
        if oldest is None or now - oldest.arrived <= (urgent.lifo_s or 0.0):
            return False
        before = len(out)
        self._release(urgent, 1, now, out, sent_as, counted=down)
        return len(out) > before
