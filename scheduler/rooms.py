"""Room rules of the dispatcher (scheduler/dispatcher.py) that weigh several of its state
objects at once: whether a tier may take a free slot now, whether only the awaiting limit holds
it, the room of a starvation-bound release, and the overload of the most urgent tier.

Each fact has one owner, and a rule that reads one owner's facts is that owner's method: the
slots and their cap (scheduler/slots.py), the standing and recovery reserves
(scheduler/reserve.py), the awaiting limits (scheduler/awaiting.py), the tiers' queues
(scheduler/backlog.py). `Rooms` holds no state of its own: it is handed the dispatcher's
objects and combines their rules. Pure: every input is those objects or `now`.
"""

from __future__ import annotations

from scheduler.awaiting import AwaitingLimits
from scheduler.backlog import Backlog
from scheduler.queues import TierQueue
from scheduler.reserve import Reserve
from scheduler.selection import ShareWindow, awaiting_upto, owed_tier
from scheduler.slots import Slots

# A backlog of the most urgent tier that the engine would clear within this many seconds, by
# the rate it frees sequences, is not an overload (`Rooms.urgent_overloaded`).
OVERLOAD_CLEAR_S = 5.0


class Rooms:
    """The combined room rules over the dispatcher's backlog, slots, reserve, awaiting limits
    and share window (the module docstring)."""

    __slots__ = ("backlog", "limits", "reserve", "shares", "slots")

    def __init__(
        self,
        backlog: Backlog,
        slots: Slots,
        reserve: Reserve,
        limits: AwaitingLimits,
        shares: ShareWindow,
    ) -> None:
        self.backlog = backlog
        self.slots = slots
        self.reserve = reserve
        self.limits = limits
        self.shares = shares

    def urgent_overloaded(self, now: float) -> bool:
        """The most urgent tier is backed up (its oldest queued request waited over
        `lifo_after_ms`) and its backlog is more than the engine clears in OVERLOAD_CLEAR_S
        even if it took every sequence the engine frees: an overload of that tier, not a
        backlog the engine works off soon. Only then do the overload rules apply (newest first,
        the feed, the recovery reserve, no allowance): at a mild overload FIFO clears the
        backlog, and newest first would leave its oldest requests until they are shed."""
        if not self.backlog.order:
            return False
        urgent = self.backlog.order[0]
        if not urgent.backed_up(now):
            return False
        return urgent.depth > self.slots.freed.per_s(now) * OVERLOAD_CLEAR_S

    def slot_room(self, tier: TierQueue) -> int:
        """Slots `tier` may take under `max_in_flight` and the standing reserve
        (`Reserve.slot_room`); 0 or less: none."""
        return self.reserve.slot_room(tier, self.slots)

    def lower_room(self, tier: TierQueue) -> int:
        """Slots a less urgent `tier` may take under the recovery reserve's cap."""
        return self.reserve.lower_room(tier, self.slots)

    def awaiting_upto(self, tier: TierQueue) -> int:
        """The awaiting requests that count against `tier`'s release (`AwaitingLimits.upto`)."""
        return self.limits.upto(self.backlog.order, tier, self.slots.awaiting)

    def awaiting_room(self, tier: TierQueue) -> int:
        """Releases `tier` may make under its awaiting limit (0 or less: none)."""
        return self.limits.limit_for(tier) - self.awaiting_upto(tier)

    def has_room(self, tier: TierQueue) -> bool:
        """`tier` may release one more request now: a slot (`slot_room`), the recovery
        reserve's room (`lower_room`) and its awaiting room (`awaiting_room`), the three
        called straight through: every decision of a poll asks it of several tiers."""
        slots = self.slots
        reserve = self.reserve
        order = self.backlog.order
        if reserve.slot_room(tier, slots) <= 0 or reserve.lower_room(tier, slots) <= 0:
            return False
        limits = self.limits
        upto = awaiting_upto(order, tier, slots.awaiting, limits.engine_priority)
        return upto < limits.limit_for(tier)

    def room(self, tier: TierQueue) -> int:
        """How many of `tier`'s requests one release may take: its slots, the recovery
        reserve's room, its awaiting room and its batch size, the least of them."""
        return min(
            self.slot_room(tier), self.lower_room(tier), self.awaiting_room(tier), tier.max_batch
        )

    def held_by_limit(self, tier: TierQueue) -> bool:
        """`tier` holds requests that only the awaiting limit keeps here (the limiter grows
        then). An overloaded most urgent tier past its feed sends more only as the next tier's:
        held by the limit only if that tier's slots would take them."""
        if not (tier.depth and self.slot_room(tier) > 0 and self.lower_room(tier)):
            return False
        order = self.backlog.order
        feed = self.limits.feed
        if tier.rank or feed is None or len(order) < 2:
            return True
        awaiting = self.awaiting_upto(tier)
        if self.limits.limit_for(tier) <= awaiting < feed:
            return True  # the limit stops it before the feed does
        down = order[1]
        return self.slot_room(down) > 0 and self.lower_room(down) > 0

    def share_room(self, tier: TierQueue) -> bool:
        """Room for a starvation-bound release of `tier`: the most urgent tier's (its awaiting
        room, and the reserved slots too: else a most urgent tier that fills every other slot
        would starve the rest again), whichever tier's request the engine sees it as
        (`share_counted`)."""
        urgent = self.backlog.order[0]
        slots = self.slots
        free = len(slots.flights) < slots.max_in_flight
        if not self.lower_room(tier) and not self.limits.overload:
            # The recovery reserve holds and the most urgent tier has no backlog (at most a
            # request that just arrived, which this poll releases): the share waits for the
            # reserve's room like any less urgent release. Only the overload itself (an
            # overloaded most urgent tier) lets it pass.
            return False
        return free and self.awaiting_upto(urgent) < self.limits.limit_for(urgent)

    def owed_tier(self, besides: TierQueue | None = None) -> TierQueue | None:
        """The tier the starvation bound releases from next, if any (`owed_tier`)."""
        shares = self.shares
        return owed_tier(self.backlog.order, shares, shares.min_share, self.share_room, besides)
