"""The reserve: slots the less urgent tiers leave to the most urgent one (`Reserve`, owned by
the dispatcher). Two rules make it up: the standing reserve of `reserved_slots`
(docs/admission.md, "A standing reserve"), and the recovery reserve (`RecoveryReserve`),
engine sequences kept for the most urgent tier after an overload.

The standing reserve: the less urgent tiers leave the last `reserved_slots` of `max_in_flight`
to the most urgent; with `reserve_follows_arrivals`, at most one slot per request of that tier
that arrived in the last RATE_WINDOW_S (a reserve kept while it sends nothing only idles engine
sequences).

The recovery reserve, why: neither vLLM nor the simulator preempts a running request for a
more urgent one (only when the KV cache runs out). After an overload, a work-conserving gateway
fills every engine sequence with the less urgent backlog (batch and offline streams run for
seconds), and a new online request, first in the engine's queue, still waits for one of them to
end: online TTFT stays at several times its baseline until that backlog has drained
(docs/performance.md, "Overload and recovery").

Its rule (docs/admission.md, "Recovery"):
- it starts when the most urgent tier is overloaded in the gateway (its oldest queued request
  has waited over `lifo_after_ms` and its backlog is more than the engine clears soon,
  `Rooms.urgent_overloaded`, scheduler/rooms.py): an overload, not a busy engine;
- while it holds, a less urgent tier may take a slot only while fewer than
  `sequences - reserve` requests (of any tier) are in flight, `reserve =
  ceil(recovery_reserve x sequences)` (at most `sequences - 1`): trunk reservation, so that
  online arrivals find a sequence free; the most urgent tier may use every slot (a stale
  most urgent request sent on as the next tier's is that tier's here);
- it holds for `recovery_hold_ms` after the most urgent tier was last backed up, or last
  waited in the engine for a sequence (a /metrics reading with requests waiting there while
  one of its requests awaits its first token) while the reserve held, but no longer than
  `EXTEND_HOLDS` holds after the last backlog; then it is given back one sequence per
  `RAMP_S`.
A busy engine alone never starts it, so a steady load that never backs online up in the
gateway keeps work-conserving release; the cost is some of the less urgent tiers' throughput
for a bounded time after each overload.

`sequences`: the smallest of `max_in_flight` and the most running requests the engine reported
while its own queue was not empty (vLLM's `num_requests_running` and `num_requests_waiting`,
scraped from /metrics); until such a reading, `max_in_flight`.

Pure and deterministic: every input carries `now`.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import TYPE_CHECKING

from scheduler.config import AdmissionConfig
from scheduler.limiter import RecentEvents
from scheduler.queues import TierQueue

if TYPE_CHECKING:
    from scheduler.slots import Slots

# After the hold the reserve is given back one sequence per RAMP_S seconds, not at once: the
# less urgent streams it let start hold their sequences for seconds, so a sudden return of
# every reserved sequence to them would press the most urgent tier again at once.
RAMP_S = 1.0
# Online waiting in the engine extends the hold up to this many holds after the last backlog.
EXTEND_HOLDS = 3


class RecoveryReserve:
    """Tracks the engine's sequence limit and when the most urgent tier was last pressed."""

    __slots__ = ("backlog_at", "hold_s", "pressed_at", "sequences_seen", "share")

    def __init__(self, share: float, hold_s: float | None) -> None:
        self.share = share
        self.hold_s = hold_s
        self.sequences_seen: int | None = None  # most running while the engine queued
        self.backlog_at: float | None = None  # last found backed up in the gateway
        self.pressed_at: float | None = None  # the hold runs from here

    def configure(self, share: float, hold_s: float | None) -> None:
        self.share = share
        self.hold_s = hold_s

    def forget_engine(self) -> None:
        """A new launch profile: the engine's limit is learned again."""
        self.sequences_seen = None

    def engine_reading(self, running: int, waiting: int) -> None:
        """A /metrics reading. Only one taken while the engine queued shows its limit."""
        if waiting > 0 and running > 0:
            seen = self.sequences_seen
            self.sequences_seen = running if seen is None else max(seen, running)

    def backed_up(self, now: float) -> None:
        """The most urgent tier was found backed up in the gateway at `now`."""
        self.backlog_at = self.pressed_at = now

    def waited_in_engine(self, now: float, max_in_flight: int) -> None:
        """A most urgent request waited in the engine for a sequence at `now`: extends a hold
        in force, within EXTEND_HOLDS holds of the last backlog."""
        if self.backlog_at is None or self.hold_s is None:
            return
        if self._reserve(max_in_flight, now) > 0 and now - self.backlog_at <= (
            EXTEND_HOLDS * self.hold_s
        ):
            self.pressed_at = now

    def sequences(self, max_in_flight: int) -> int:
        seen = self.sequences_seen
        return max_in_flight if seen is None else min(max_in_flight, seen)

    def _reserve(self, max_in_flight: int, now: float) -> int:
        """Sequences kept from the less urgent tiers now (0: none)."""
        if self.share <= 0 or self.hold_s is None or self.pressed_at is None:
            return 0
        sequences = self.sequences(max_in_flight)
        reserve = min(sequences - 1, math.ceil(self.share * sequences))
        past = now - self.pressed_at - self.hold_s
        if past > 0:  # the ramp: one sequence back to them per RAMP_S
            reserve -= math.floor(past / RAMP_S) + 1
        return max(0, reserve)

    def lower_cap(self, max_in_flight: int, now: float) -> int | None:
        """The in-flight count (all tiers) under which a less urgent tier may take a slot
        now; None: no limit from the reserve."""
        reserve = self._reserve(max_in_flight, now)
        return None if reserve == 0 else self.sequences(max_in_flight) - reserve


class Reserve:
    """The standing and the recovery reserve of the dispatcher's slots (the module docstring).
    `standing` and `recovery_cap` are as of the last poll (`at_poll`): every decision of a
    poll sees the same reserve."""

    __slots__ = (
        "arrivals",
        "follows",
        "recovery",
        "recovery_cap",
        "reserved",
        "standing",
    )

    def __init__(self) -> None:
        self.reserved = 0  # `reserved_slots`, below `max_in_flight`
        self.follows = False  # `reserve_follows_arrivals`
        self.recovery = RecoveryReserve(0.0, None)
        # The most urgent tier's arrivals, while the standing reserve follows them.
        self.arrivals: dict[str, RecentEvents] = {}
        self.standing = 0  # the standing reserve (`_standing_now`)
        self.recovery_cap: int | None = None  # the less urgent tiers' in-flight cap, if any

    def configure(
        self, admission: AdmissionConfig, max_in_flight: int, tiers: Collection[str]
    ) -> None:
        self.reserved = min(admission.reserved_slots, max_in_flight - 1)
        self.follows = admission.reserve_follows_arrivals
        hold = admission.recovery_hold_ms
        self.recovery.configure(
            float(admission.recovery_reserve), None if hold is None else hold / 1000.0
        )
        self.arrivals = {name: got for name, got in self.arrivals.items() if name in tiers}

    def arrived(self, tier: TierQueue, now: float) -> None:
        """A request of `tier` was queued at `now`: only the most urgent tier's count, and
        only while the standing reserve follows them."""
        if self.follows and not tier.rank:
            self.arrivals.setdefault(tier.name, RecentEvents()).add(now)

    def at_poll(self, order: list[TierQueue], max_in_flight: int, now: float) -> None:
        """The reserve for the poll at `now` (after the recovery reserve heard of a backlog)."""
        self.recovery_cap = self.recovery.lower_cap(max_in_flight, now)
        self.standing = self._standing_now(order, now)

    def _standing_now(self, order: list[TierQueue], now: float) -> int:
        """The standing reserve: `reserved_slots`; with `reserve_follows_arrivals`, at most one
        slot per request of the most urgent tier that arrived in the last RATE_WINDOW_S. The
        reserve is there for that tier's arrivals; kept while it sends nothing (a quiet hour,
        or the lower tiers' backlog draining after a busy spell) it only idles engine
        sequences."""
        if not self.follows or not self.reserved or not order:
            return self.reserved
        recent = self.arrivals.get(order[0].name)
        return 0 if recent is None else min(self.reserved, recent.count(now))

    def lapse(self, order: list[TierQueue], now: float) -> float | None:
        """When the standing reserve next shrinks by time alone, if a less urgent tier waits
        (a poll then: the freed slot is theirs). None: no such moment matters."""
        if not (self.follows and self.standing):
            return None
        if not any(tier.depth for tier in order[1:]):
            return None
        return self.arrivals[order[0].name].falls_below(self.standing, now)

    def slot_room(self, tier: TierQueue, slots: Slots) -> int:
        """Slots `tier` may take under `max_in_flight` and the standing reserve; 0 or less:
        none. The less urgent tiers leave the reserve's last slots to the most urgent, whoever
        holds the others (trunk reservation, docs/architecture.md#the-dispatchers-semantics)."""
        free = slots.max_in_flight - len(slots.flights)
        if not tier.rank or not self.standing:
            return free
        return free - self.standing

    def lower_room(self, tier: TierQueue, slots: Slots) -> int:
        """Slots a less urgent `tier` may still take while the recovery reserve holds: under
        its cap on the in-flight count."""
        cap = self.recovery_cap
        if not tier.rank or cap is None:
            return slots.max_in_flight
        return max(0, cap - len(slots.flights))

    def reserved_now(self, max_in_flight: int) -> int:
        """Slots the less urgent tiers leave to the most urgent (as of the last poll): the
        standing reserve, or while the recovery reserve holds, the engine sequences it keeps
        (of the engine's sequences, not of a `max_in_flight` far above what the engine
        runs)."""
        cap = self.recovery_cap
        if cap is None:
            return self.standing
        return max(self.standing, self.recovery.sequences(max_in_flight) - cap)
