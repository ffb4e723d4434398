"""The recovery reserve: engine sequences kept for the most urgent tier after an overload.

Why: neither vLLM nor the simulator preempts a running request for a more urgent one (only when
the KV cache runs out). After an overload, a work-conserving gateway fills every engine
sequence with the less urgent backlog (batch and offline streams run for seconds), and a new
online request, first in the engine's queue, still waits for one of them to end: online TTFT
stays at several times its baseline until that backlog has drained (docs/performance.md,
"Overload and recovery").

The rule (docs/admission.md, "Recovery"):
- it starts when the most urgent tier is overloaded in the gateway (its oldest queued request
  has waited over `lifo_after_ms` and its backlog is more than the engine clears soon,
  `Rooms._urgent_overloaded`): an overload, not a busy engine;
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
scraped from /metrics); until such a reading, `max_in_flight`. The capped standing reserve
counts against the same figure (scheduler/rooms.py, `_slot_room`).

Pure and deterministic: every input carries `now`.
"""

from __future__ import annotations

import math

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
