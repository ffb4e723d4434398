"""The dispatcher's backlog: its tiers' queues in order of urgency and every queued request by
id (one tier's queue and its layout: scheduler/queues.py).

Owned by `Dispatcher` (scheduler/dispatcher.py), which releases from it; what it holds changes
only through the events here (a request queued, cancelled, timed out) and the release.
"""

from __future__ import annotations

from scheduler.config import TierConfig
from scheduler.queues import Entry, TierQueue
from scheduler.stats import retry_after_s
from scheduler.types import QUEUE_TIMEOUT, Rejection, Request


class Backlog:
    """The tiers (`tiers` by name, `order` most urgent first, a tier's `rank` its place there)
    and the queued requests (`entries` by id). `seq` numbers arrivals: the release order
    within a tier and across its length groups."""

    __slots__ = ("entries", "order", "seq", "tiers")

    def __init__(self) -> None:
        self.tiers: dict[str, TierQueue] = {}
        self.order: list[TierQueue] = []
        self.entries: dict[str, Entry] = {}
        self.seq = 0

    @property
    def urgent(self) -> TierQueue:
        """The most urgent tier (a config has at least one)."""
        return self.order[0]

    def configure(self, config: TierConfig) -> None:
        """The tiers of `config`, most urgent first. A tier kept by name keeps its queue and
        counters (re-counted by `requeue`); a removed tier's requests are re-homed there."""
        tiers: dict[str, TierQueue] = {}
        for rank, name in enumerate(config.tiers_by_urgency()):
            old = self.tiers.get(name)
            if old is not None:
                old.rank = rank
                old.configure(config, rank)
                tiers[name] = old
            else:
                tiers[name] = TierQueue(name, config, rank)
        self.tiers = tiers
        self.order = list(tiers.values())

    def home(self, tier: TierQueue) -> TierQueue:
        """Where a request of `tier` belongs after a reconfigure: the tier of that name, or
        the least urgent one when the name is gone."""
        return self.tiers.get(tier.name, self.order[-1])

    def requeue(self) -> None:
        """After `configure`: every tier emptied (`TierQueue.clear`) and each queued request
        put back in its tier (`home`), in arrival order, with its arrival time. The in-flight
        counts are the slots' to restore (`Slots.rehome`)."""
        entries = sorted(self.entries.values(), key=lambda e: e.seq)
        for tier in self.order:
            tier.clear()
        for entry in entries:
            entry.tier = self.home(entry.tier)
            entry.tier.put(entry)

    def queue(self, req: Request, tier: TierQueue, now: float) -> None:
        """Queue `req` in `tier` as arrived at `now` (the caller checked its room)."""
        self.seq += 1
        entry = Entry(req, now, self.seq, tier)
        tier.put(entry)
        self.entries[req.id] = entry

    def cancel(self, req_id: str) -> bool:
        """Drop a queued request (its client left). False when it is not queued."""
        entry = self.entries.pop(req_id, None)
        if entry is None:
            return False
        entry.tier.cancel(entry)
        return True

    def expire(self, now: float, out: list[tuple[Request, Rejection]]) -> None:
        """Refuse (503 + Retry-After) every request that has waited its tier's timeout."""
        entries = self.entries
        for tier in self.order:
            if tier.timeout_s is None or not tier.depth:
                continue
            for entry in tier.pop_expired(now):
                del entries[entry.req.id]
                detail = f"waited over {tier.timeout_s:g} s in queue {tier.name}"
                rejection = Rejection(QUEUE_TIMEOUT, 503, retry_after_s(tier, now), detail)
                out.append((entry.req, rejection))
