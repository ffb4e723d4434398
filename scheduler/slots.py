"""The dispatcher's slots: the requests it released to the engine and the cap on them.

A released request holds a slot until it ends (`complete`, or the client leaving) and awaits
its first token until the engine produces one; both counts are kept per tier too (the tier it
belongs to: `in_flight`; the tier it was counted as: `awaiting`, scheduler/queues.py
`Flight`). Owned by `Dispatcher` (scheduler/dispatcher.py), which fills the slots in
`poll`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.limiter import RecentEvents
from scheduler.queues import Flight

if TYPE_CHECKING:
    from scheduler.backlog import Backlog


class Slots:
    """`flights`: the released requests by id; `awaiting`: how many of them await their
    first token; `max_in_flight`: the cap on `flights` (the config's, else the caller's
    default, the engine's max_num_seqs); `freed`: the requests that ended lately, any tier
    (the rate at which the engine frees sequences)."""

    __slots__ = ("awaiting", "flights", "freed", "max_in_flight")

    def __init__(self) -> None:
        self.flights: dict[str, Flight] = {}
        self.awaiting = 0
        self.max_in_flight = 1
        self.freed = RecentEvents()

    @property
    def free(self) -> int:
        """Slots left under `max_in_flight` (0 or less: none)."""
        return self.max_in_flight - len(self.flights)

    def first_token(self, req_id: str) -> Flight | None:
        """`req_id`'s first token came: it awaits no longer. The flight, if it was awaiting."""
        flight = self.flights.get(req_id)
        if flight is None or not flight.awaiting:
            return None
        flight.settle()
        self.awaiting -= 1
        return flight

    def complete(self, req_id: str, now: float) -> bool:
        """`req_id` ended (answered, or its client left): its slot is free. False when it was
        not in flight."""
        flight = self.flights.pop(req_id, None)
        if flight is None:
            return False
        flight.tier.in_flight -= 1
        self.freed.add(now)
        if flight.awaiting:
            flight.settle()
            self.awaiting -= 1
        return True

    def rehome(self, backlog: Backlog) -> None:
        """After a reconfigure (`Backlog.requeue` zeroed the tiers' counts): each flight
        belongs to, and is counted in, the tier of its tier's name, or the least urgent one
        when that name is gone; the tiers' counts are restored."""
        for flight in self.flights.values():
            flight.tier = tier = backlog.home(flight.tier)
            flight.counted = counted = backlog.home(flight.counted)
            tier.in_flight += 1
            counted.awaiting += flight.awaiting
            tier.owed_awaiting += flight.owed and flight.awaiting
