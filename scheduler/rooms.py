"""Room rules of the dispatcher (scheduler/dispatcher.py): which tier may take a free slot now.

A mixin over the dispatcher's state, kept apart so that each rule reads on its own: the slot
caps (`max_in_flight`, the standing reserve of `reserved_slots`, the recovery reserve of
scheduler/reserve.py), the awaiting limit per tier (the most urgent tier's allowance,
scheduler/limiter.py), and the room of a starvation-bound release. Pure: every input is the
dispatcher's state or `now`.
"""

from __future__ import annotations

from scheduler.limiter import AwaitingLimit, RecentEvents
from scheduler.queues import Flight, TierQueue
from scheduler.reserve import RecoveryReserve
from scheduler.selection import ShareWindow, awaiting_upto, owed_tier

# A backlog of the most urgent tier that the engine would clear within this many seconds, by
# the rate it frees sequences, is not an overload (`Rooms._urgent_overloaded`).
OVERLOAD_CLEAR_S = 5.0


class Rooms:
    """The room rules; the state is the dispatcher's (set in its __init__ and _apply)."""

    _flight: dict[str, Flight]
    _order: list[TierQueue]
    _awaiting: int
    _limit: int
    _urgent_limit: int
    _recovery_cap: int | None
    _urgent_overload: bool  # the most urgent tier was overloaded at the poll's start
    _feed: int | None  # its awaiting in the engine while overloaded (`_release`), if any
    _shares: ShareWindow
    _freed: RecentEvents  # requests ended (engine sequences freed), any tier
    _arrivals: dict[str, RecentEvents]  # most urgent requests queued (while following), per tier
    _standing: int  # the standing reserve as of the poll (`_standing_now`)
    max_in_flight: int
    reserved: int
    reserve_follows: bool
    reserve_caps_lower: bool
    min_share: float
    engine_priority: bool
    limiter: AwaitingLimit
    recovery: RecoveryReserve

    def _slot_room(self, tier: TierQueue) -> int:
        """Slots `tier` may take under `max_in_flight` and the standing reserve
        (`_standing_now`); 0 or less: none. The less urgent tiers leave the reserve's last
        slots to the most urgent; with `reserve_caps_lower_tiers` every other request in
        flight counts against a cap of the engine's sequences - the reserve instead, so that
        the most urgent tier's own requests take from the reserve first and leave no slot idle.
        Only a request of the most urgent tier sent as its own is outside the cap: a stale one
        sent on as the next tier's (the overload rules) leaves the reserve to new ones, as in
        the recovery reserve, and a less urgent one promoted or owed to its priority, or of a
        tier whose age bound sends it one tier up (`counted_tier`), is still less urgent work.
        The engine's sequences are `max_in_flight` or, once a /metrics reading showed fewer
        running while the engine queued, that many (scheduler/reserve.py): with
        `max_in_flight` above the engine's limit the most urgent tier may wait in a priority
        engine's own queue, first there, and take the next sequence that ends without the
        gateway's hand-off."""
        free = self.max_in_flight - len(self._flight)
        if not tier.rank or not self._standing:
            return free
        if not self.reserve_caps_lower:
            return free - self._standing
        sequences = self.recovery.sequences(self.max_in_flight)
        lower = len(self._flight) - self._order[0].sent_as_own
        return min(free, sequences - min(self._standing, sequences - 1) - lower)

    def _standing_now(self, now: float) -> int:
        """The standing reserve: `reserved_slots`; with `reserve_follows_arrivals`, at most one
        slot per request of the most urgent tier that arrived in the last RATE_WINDOW_S. The
        reserve is there for that tier's arrivals; kept while it sends nothing (a quiet hour,
        or the lower tiers' backlog draining after a busy spell) it only idles engine
        sequences."""
        if not self.reserve_follows or not self.reserved or not self._order:
            return self.reserved
        recent = self._arrivals.get(self._order[0].name)
        return 0 if recent is None else min(self.reserved, recent.count(now))

    def _standing_lapse(self, now: float) -> float | None:
        """When the standing reserve next shrinks by time alone, if a less urgent tier waits
        (a poll then: the freed slot is theirs). None: no such moment matters."""
        if not (self.reserve_follows and self._standing):
            return None
        if not any(tier.depth for tier in self._order[1:]):
            return None
        return self._arrivals[self._order[0].name].falls_below(self._standing, now)

    def _lower_room(self, tier: TierQueue) -> int:
        """Slots a less urgent `tier` may still take while the recovery reserve holds: under
        its cap on the in-flight count (scheduler/reserve.py)."""
        cap = self._recovery_cap
        if not tier.rank or cap is None:
            return self.max_in_flight
        return max(0, cap - len(self._flight))

    def _has_room(self, tier: TierQueue) -> bool:
        return (
            self._slot_room(tier) > 0
            and self._lower_room(tier) > 0
            and self._awaiting_upto(tier) < self._limit_for(tier)
        )

    def _limit_for(self, tier: TierQueue) -> int:
        """The awaiting limit of `tier`'s release. The most urgent tier, in an engine ordering
        by priority, loses nothing by waiting there rather than here (it goes first in both,
        FIFO), so it has `_urgent_allowance` on top: only a backlog beyond that stays here."""
        return self._urgent_limit if tier.rank == 0 else self._limit

    def _urgent_overloaded(self, now: float) -> bool:
        """The most urgent tier is backed up (its oldest queued request waited over
        `lifo_after_ms`) and its backlog is more than the engine clears in OVERLOAD_CLEAR_S
        even if it took every sequence the engine frees: an overload of that tier, not a
        backlog the engine works off soon. Only then do the overload rules apply (newest first,
        the feed, the recovery reserve, no allowance): at a mild overload FIFO clears the
        backlog, and newest first would leave its oldest requests until they are shed."""
        if not self._order:
            return False
        urgent = self._order[0]
        if not urgent.backed_up(now):
            return False
        return urgent.depth > self._freed.per_s(now) * OVERLOAD_CLEAR_S

    def _urgent_allowance(self, now: float) -> int:
        """The most urgent tier's awaiting on top of the limit (priority engine, adaptive):
        half a second of its first tokens, unless overloaded (the engine's FIFO share of the
        backlog would delay the newest, which LIFO releases first); plus each less urgent
        request awaiting its first token: the engine gives a freed slot to an urgent request
        ahead of those, and an urgent request held here lets them take it instead."""
        urgent = self._order[0]
        drain = 0 if self._urgent_overload else self.limiter.drain_allowance(urgent.name, now)
        return drain + sum(tier.awaiting for tier in self._order[1:])

    def _feed_now(self, now: float) -> int | None:
        """While the most urgent tier is overloaded (engine ordering by priority, adaptive
        limit): how many of its requests may await their first token in the engine as its own,
        the limiter's `feed` (what the engine starts next). The gateway serves that backlog
        newest first, the engine its queue oldest first within a priority: each urgent
        request waiting there is one more that a request sent now waits behind. Releases
        beyond it go as the next tier's (`demoted_tier`), as stale ones do. None: no bound."""
        if not (self._urgent_overload and self.engine_priority and self.limiter.adaptive):
            return None
        return self.limiter.feed(self._order[0].name, now)

    def _held_by_limit(self, tier: TierQueue) -> bool:
        """`tier` holds requests that only the awaiting limit keeps here (the limiter grows
        then). An overloaded most urgent tier past its feed sends more only as the next tier's:
        held by the limit only if that tier's slots would take them."""
        if not (tier.depth and self._slot_room(tier) > 0 and self._lower_room(tier)):
            return False
        if tier.rank or self._feed is None or len(self._order) < 2:
            return True
        awaiting = self._awaiting_upto(tier)
        if self._limit_for(tier) <= awaiting < self._feed:
            return True  # the limit stops it before the feed does
        down = self._order[1]
        return self._slot_room(down) > 0 and self._lower_room(down) > 0

    def _awaiting_upto(self, tier: TierQueue) -> int:
        return awaiting_upto(self._order, tier, self._awaiting, self.engine_priority)

    def _reserved_now(self) -> int:
        """Slots the less urgent tiers leave to the most urgent (as of the last poll): the
        standing reserve (`_standing_now`), or while the recovery reserve holds, the engine
        sequences it keeps (of `engine_sequences`, not of a `max_in_flight` far above what the
        engine runs)."""
        cap = self._recovery_cap
        if cap is None:
            return self._standing
        return max(self._standing, self.recovery.sequences(self.max_in_flight) - cap)

    def _share_room(self, tier: TierQueue) -> bool:
        """Room for a starvation-bound release of `tier`: the most urgent tier's (its awaiting
        room, and the reserved slots too: else a most urgent tier that fills every other slot
        would starve the rest again), whichever tier's request the engine sees it as
        (`share_counted`)."""
        urgent = self._order[0]
        free = len(self._flight) < self.max_in_flight
        if not self._lower_room(tier) and not self._urgent_overload:
            # The recovery reserve holds and the most urgent tier has no backlog (at most a
            # request that just arrived, which this poll releases): the share waits for the
            # reserve's room like any less urgent release. Only the overload itself (an overloaded
            # most urgent tier) lets it pass.
            return False
        return free and self._awaiting_upto(urgent) < self._limit_for(urgent)

    def _owed_tier(self, besides: TierQueue | None = None) -> TierQueue | None:
        return owed_tier(self._order, self._shares, self.min_share, self._share_room, besides)
