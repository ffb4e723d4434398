"""Which queued requests the dispatcher releases next
(docs/architecture.md#the-dispatchers-semantics): its release rules as pure functions of the tiers'
queues (scheduler/queues.py); scheduler/dispatcher.py holds the state, applies them and keeps the
counts.

The release rule, each time `Dispatcher.poll` runs, while a slot is free (in-flight under
`max_in_flight` and awaiting-first-token under its limit, scheduler/limiter.py; with
`pass_priority` the engine's priority queue lets a more urgent request overtake the less urgent
ones waiting there, so only awaiting requests of tiers at least as urgent count against a tier's
release, and the most urgent tier's limit has half a second of its first tokens and the less
urgent tiers' awaiting count on top, scheduler/awaiting.py; a tier with an age bound
is held while a more urgent request awaits, `awaiting_upto`):
0. the age bound: the oldest request past its tier's `promote_after_ms` goes as a request of
   the next more urgent tier (its room, its awaiting count, its engine priority), `aged_tier`;
1. the starvation bound: a tier with queued requests whose share of the engine work (prompt
   plus maximum output tokens) of the last `SHARE_WINDOW` released requests (`ShareWindow`)
   is under `admission.min_share` is owed; the most urgent owed tier releases one request,
   `owed_tier`: its oldest, or its newest while its oldest has waited over
   `admission.lifo_after_ms` (a stale backlog's oldest client has most likely given up).
   While a more urgent tier has requests waiting here, it goes to the engine as a request of
   the most urgent of those (it passes them, and no tier that is served as it comes) and
   counts there, but it needs the most urgent tier's awaiting room (not its own, which the
   more urgent tiers may fill); with none ahead it passes no one and goes as its own tier,
   `share_counted`;
2. else the most urgent ready tier releases a batch (up to `max_batch_size` requests and
   `max_tokens_per_batch` tokens), stopping early when another tier becomes owed,
   `chosen_tier`;
3. else, work conservation: the most urgent tier holding any request releases a batch, ready or
   not. vLLM batches continuously, so holding a request while a slot is idle buys nothing:
   below saturation every request goes on arrival, and windows and batch sizes order releases
   only while the engine is saturated (slots free one by one and rules 1-2 pick who gets them).
A tier that may not use the reserved slots is skipped while only those are left. Within a
tier, oldest first; the most urgent tier newest first while its oldest has waited over
`admission.lifo_after_ms` (adaptive LIFO), `release_order`; with the engine ordering by
priority, its stale requests (waited over that bound) go as the next tier's, in that tier's
room, `demoted_tier`, so the engine too serves the requests sent after them first.
`next_wakeup` says when time alone changes a decision.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

from scheduler.queues import Entry, TierQueue

SHARE_WINDOW = 128  # released requests the starvation bound's shares are counted over
_HELD = 1 << 30  # an awaiting count no limit admits

# Whether a tier may release one more request now (the dispatcher's slots and awaiting limit).
HasRoom = Callable[[TierQueue], bool]


class ShareWindow:
    """The last SHARE_WINDOW released requests: per tier how many (`counts`) and how much
    engine work (`work`: prompt plus maximum output tokens, `Entry.tokens`), and the work of
    all of them (`total`). The starvation bound compares work, not requests: an offline
    request holds a sequence many times as long as an online one, so a share of releases
    would be a far larger share of the engine (docs/admission.md, "Starvation bound").
    `min_share`: the floor a less urgent tier's share is owed (`admission.min_share`)."""

    __slots__ = ("counts", "min_share", "released", "total", "work")

    def __init__(self) -> None:
        self.min_share = 0.0
        self.released: deque[tuple[str, int]] = deque()
        self.counts: dict[str, int] = {}
        self.work: dict[str, int] = {}
        self.total = 0

    def count(self, name: str, tokens: int) -> None:
        """One more request of tier `name`, of `tokens` tokens of work, released."""
        released = self.released
        counts = self.counts
        work = self.work
        if len(released) == SHARE_WINDOW:
            gone, gone_tokens = released.popleft()
            counts[gone] -= 1
            work[gone] -= gone_tokens
            self.total -= gone_tokens
        released.append((name, tokens))
        counts[name] = counts.get(name, 0) + 1
        work[name] = work.get(name, 0) + tokens
        self.total += tokens


def awaiting_upto(
    order: Sequence[TierQueue], tier: TierQueue, awaiting: int, engine_priority: bool
) -> int:
    """Awaiting requests that count against `tier`'s release: all of them (`awaiting`), or
    with the engine ordering by priority only those of tiers at least as urgent. A tier with an
    age bound (`promote_after_ms`) counts all of them even then: held here while the engine is
    busy, its waiting requests can still be promoted; in the engine's own queue they would wait
    behind every more urgent request released after them. So it is released, unpromoted, only
    while no more urgent request awaits its first token."""
    if not engine_priority:
        return awaiting
    ahead = sum(t.awaiting for t in order[: tier.rank])
    if tier.promote_s is not None:
        # None ahead, or it would wait in the engine behind them and behind every more
        # urgent request released after it: count it full then (held until promoted).
        return awaiting if ahead == 0 else _HELD
    return ahead + tier.awaiting


def aged_tier(order: Sequence[TierQueue], now: float, has_room: HasRoom) -> TierQueue | None:
    """The tier holding the oldest request past its `promote_after_ms` while the next more
    urgent tier has a free slot: that request goes next, as that tier's would (counted
    in its awaiting, sent with its engine priority), so each promotion takes one step."""
    best: Entry | None = None
    for tier in order[1:]:
        entry = tier.aged(now) if tier.promote_s is not None else None
        if (
            entry is not None
            and (best is None or entry.seq < best.seq)
            and has_room(order[tier.rank - 1])
        ):
            best = entry
    return None if best is None else best.tier


def owed_tier(
    order: Sequence[TierQueue],
    shares: ShareWindow,
    min_share: float,
    has_room: HasRoom,
    besides: TierQueue | None = None,
) -> TierQueue | None:
    """The most urgent of the less urgent tiers (the first goes first anyway) with queued
    requests and a free slot whose share of the recent releases' engine work is under
    `min_share` (the starvation bound), other than `besides`, and none of whose
    starvation-bound releases still awaits its first token: one at a time.
    A debt paid at once would put a burst of the tier's requests in the engine at the most
    urgent tier's priority (`share_counted`), and the urgent requests sent next would wait
    out all of their prefills (docs/admission.md, "Starvation bound")."""
    if min_share <= 0:
        return None
    floor = min_share * shares.total
    work = shares.work
    for tier in order[1:]:  # the most urgent tier needs no floor: it goes first anyway
        if (
            tier is not besides
            and tier.depth
            and not tier.owed_awaiting
            and work.get(tier.name, 0) < floor
            and has_room(tier)
        ):
            return tier
    return None


def chosen_tier(order: Sequence[TierQueue], now: float, has_room: HasRoom) -> TierQueue | None:
    """The most urgent ready tier with a free slot, else the most urgent one holding any
    request (work conservation)."""
    fallback: TierQueue | None = None
    for tier in order:
        if not tier.depth or not has_room(tier):
            continue
        if tier.ready(now):
            return tier
        if fallback is None:
            fallback = tier
    return fallback


def counted_tier(order: Sequence[TierQueue], tier: TierQueue) -> TierQueue:
    """The tier in whose awaiting a release of `tier` counts, and whose engine priority it
    carries: a tier with an age bound goes as the next more urgent one (`awaiting_upto`)."""
    return order[tier.rank - 1] if tier.promote_s is not None else tier


def share_counted(order: Sequence[TierQueue], tier: TierQueue) -> TierQueue:
    """The tier a starvation-bound release of `tier` counts in and goes to the engine as: the
    most urgent tier with requests waiting here (the release passes them, and the engine's
    priority queue must not starve it again behind them), else its own (`counted_tier`).
    Not a more urgent tier than that: one with nothing waiting here is served as it comes,
    and a release sent with its priority would take the next free sequence ahead of its
    requests (an online request behind it would wait out an offline prompt's prefill)."""
    for ahead in order[: tier.rank]:
        if ahead.depth:
            return ahead
    return counted_tier(order, tier)


def demoted_tier(
    order: Sequence[TierQueue], tier: TierQueue, engine_priority: bool
) -> TierQueue | None:
    """The tier an overloaded most urgent tier's stale requests (waited over `lifo_after_ms`)
    go to the engine as: the next one, in its room, so that the requests sent after them
    overtake them in the engine's priority queue as they do here. None when that does not
    apply (another tier, a single tier, or an engine not ordering by priority)."""
    if tier.rank or len(order) < 2 or not engine_priority:
        return None
    return order[1]


def release_order(tier: TierQueue, lifo: bool) -> list[deque[Entry]]:
    """The order `tier`'s length groups are released in: by the age of their heads, oldest
    first, or with `lifo` (the tier is overloaded) by their newest entries, newest first (dead
    entries found on the way are dropped; the release skips any others it meets)."""
    if lifo:
        for dq in tier.groups:
            while dq and not dq[-1].alive:
                dq.pop()
                tier.dead -= 1
        return sorted((dq for dq in tier.groups if dq), key=lambda dq: -dq[-1].seq)
    if len(tier.groups) == 1:
        return tier.groups
    tier.oldest()  # drops dead heads so that every deque head below is live
    return sorted((dq for dq in tier.groups if dq), key=lambda dq: dq[0].seq)


def next_wakeup(order: Sequence[TierQueue], now: float) -> float | None:
    """Earliest future instant at which time alone changes a decision: a queued request
    timing out or passing its age bound. Waits running out need no timer: a request waits only
    while no slot is free, and a first token, completion or cancel wakes the driver when one
    frees."""
    wakeup: float | None = None
    for tier in order:
        if not tier.depth:
            continue
        oldest = tier.oldest()
        if oldest is None:
            continue
        for bound in (tier.timeout_s, tier.promote_s):
            if bound is None:
                continue
            when = oldest.arrived + bound
            if when > now and (wakeup is None or when < wakeup):
                wakeup = when
    return wakeup
