"""The dispatcher's limits on released requests awaiting their first token, per tier, and what
the engine's scheduling policy makes of them (`AwaitingLimits`, owned by the dispatcher).

The limit itself, fixed or adaptive, is scheduler/limiter.py's `AwaitingLimit`. On top of it,
with the engine ordering by priority (`engine_priority`: the config's `pass_priority` and an
engine that runs vLLM's priority policy):
- only the awaiting requests of tiers at least as urgent count against a tier's release
  (scheduler/selection.py, `awaiting_upto`): the engine's priority queue lets a more urgent
  request overtake the less urgent ones waiting there;
- the most urgent tier has an allowance on top of the limit (`_urgent_allowance`), and while it
  is overloaded a feed (`_feed_now`) bounds how many of its requests await in the engine as its
  own (docs/admission.md, "The awaiting limit" and "Overload").
The per-poll figures (`overload`, `feed`, `limit`, `urgent_limit`) are fixed at the poll's
start (`at_poll`): every decision of a poll sees the same limits.
"""

from __future__ import annotations

from scheduler.config import AdmissionConfig
from scheduler.limiter import AwaitingLimit
from scheduler.queues import TierQueue
from scheduler.selection import awaiting_upto


class AwaitingLimits:
    """`limiter`: the awaiting limit; `pass_priority`: the config sends vLLM's `priority`;
    `engine_orders`: the engine orders its queue by it, as the agent learned (assumed until
    told otherwise, `engine_policy`); `engine_priority`: both."""

    __slots__ = (
        "engine_orders",
        "engine_priority",
        "feed",
        "limit",
        "limiter",
        "overload",
        "pass_priority",
        "urgent_limit",
    )

    def __init__(self, default_max_in_flight: int) -> None:
        self.limiter = AwaitingLimit(None, default_max_in_flight)
        self.pass_priority = True
        self.engine_orders = True
        self.engine_priority = True
        self.limit = 1  # the awaiting limit of the poll in progress
        self.urgent_limit = 1  # the most urgent tier's (see `limit_for`)
        self.overload = False  # the most urgent tier was overloaded at the poll's start
        self.feed: int | None = None  # its awaiting in the engine while overloaded, if bound

    def configure(self, admission: AdmissionConfig, max_in_flight: int) -> None:
        self.limiter.fixed = admission.max_awaiting_first_token
        self.limiter.set_ceiling(max_in_flight)
        # vLLM's priority queue orders what waits inside the engine: a less urgent request
        # awaiting its first token there does not delay a more urgent one, so it does not count
        # against the more urgent tier's awaiting limit.
        self.pass_priority = admission.pass_priority
        self.engine_priority = self.pass_priority and self.engine_orders

    def engine_policy(self, *, priority: bool) -> None:
        """The engine's scheduling policy as the agent learned it: priority (True) or fcfs
        (an engine that refuses `priority`). Kept across reconfigures: it is the engine's,
        not the config's."""
        self.engine_orders = priority
        self.engine_priority = self.pass_priority and priority

    def at_poll(
        self, order: list[TierQueue], overload: bool, max_in_flight: int, now: float
    ) -> None:
        """The limits for the poll at `now`; `overload`: the most urgent tier is overloaded
        (scheduler/rooms.py, `Rooms.urgent_overloaded`)."""
        self.overload = overload
        self.feed = self._feed_now(order, now)
        self.limit = self.urgent_limit = limit = self.limiter.value
        if self.engine_priority and order and self.limiter.adaptive:
            extra = self._urgent_allowance(order, now)
            self.urgent_limit = max(limit, min(max_in_flight, limit + extra))

    def limit_for(self, tier: TierQueue) -> int:
        """The awaiting limit of `tier`'s release. The most urgent tier, in an engine ordering
        by priority, loses nothing by waiting there rather than here (it goes first in both,
        FIFO), so it has `_urgent_allowance` on top: only a backlog beyond that stays here."""
        return self.urgent_limit if tier.rank == 0 else self.limit

    def upto(self, order: list[TierQueue], tier: TierQueue, awaiting: int) -> int:
        """The awaiting requests (of `awaiting` in all) that count against `tier`'s release."""
        return awaiting_upto(order, tier, awaiting, self.engine_priority)

    def _urgent_allowance(self, order: list[TierQueue], now: float) -> int:
        """The most urgent tier's awaiting on top of the limit (priority engine, adaptive):
        half a second of its first tokens, unless overloaded (the engine's FIFO share of the
        backlog would delay the newest, which LIFO releases first); plus each less urgent
        request awaiting its first token: the engine gives a freed slot to an urgent request
        ahead of those, and an urgent request held here lets them take it instead."""
        urgent = order[0]
        drain = 0 if self.overload else self.limiter.drain_allowance(urgent.name, now)
        return drain + sum(tier.awaiting for tier in order[1:])

    def _feed_now(self, order: list[TierQueue], now: float) -> int | None:
        """While the most urgent tier is overloaded (engine ordering by priority, adaptive
        limit): how many of its requests may await their first token in the engine as its own,
        the limiter's `feed` (what the engine starts next). The gateway serves that backlog
        newest first, the engine its queue oldest first within a priority: each urgent
        request waiting there is one more that a request sent now waits behind. Releases
        beyond it go as the next tier's (`demoted_tier`), as stale ones do. None: no bound."""
        if not (self.overload and self.engine_priority and self.limiter.adaptive):
            return None
        return self.limiter.feed(order[0].name, now)
