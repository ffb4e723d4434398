"""Per-tier counters and their summary as plain data (the observability half of
docs/architecture.md#the-dispatchers-semantics).

Everything kept here is bounded: recent queue waits and drain events live in fixed-size deques,
so memory and the cost of a summary do not grow with traffic.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

from scheduler.limiter import AwaitingLimit
from scheduler.types import ReleaseRecord, SchedulerStats, TierStats, WaitSummary

WAIT_WINDOW = 1024  # queue waits kept per tier for percentiles
DRAIN_WINDOW_S = 30.0  # how far back the drain rate looks
DEFAULT_RETRY_AFTER_S = 5.0  # nothing drained recently: no basis for an estimate
MIN_RETRY_AFTER_S = 1.0  # Retry-After is whole seconds on the wire
MAX_RETRY_AFTER_S = 60.0


class TierBook:
    """Counters of one tier; the dispatcher's tier class adds the queue itself."""

    __slots__ = (
        "awaiting",
        "cancelled",
        "depth",
        "drain",
        "in_flight",
        "last_padding",
        "name",
        "owed_awaiting",
        "priority",
        "queued_tokens",
        "rejections",
        "released",
        "waits",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.priority = 0
        self.depth = 0
        self.queued_tokens = 0
        self.in_flight = 0
        self.awaiting = 0
        # Its starvation-bound releases still awaiting their first token (at most one).
        self.owed_awaiting = 0
        self.released = 0
        self.cancelled = 0
        self.rejections: dict[str, int] = {}
        self.waits: deque[float] = deque(maxlen=WAIT_WINDOW)
        self.drain: deque[tuple[float, int]] = deque(maxlen=256)
        self.last_padding: float | None = None

    def effective_wait(self) -> float:
        raise NotImplementedError

    def adaptive_active(self) -> bool:
        raise NotImplementedError

    def ready(self, now: float) -> bool:
        raise NotImplementedError

    def record_release(self, now: float, size: int, padding_ratio: float) -> None:
        self.released += size
        self.last_padding = padding_ratio
        self.drain.append((now, size))


def retry_after_s(tier: TierBook, now: float) -> float:
    """How long until the tier's current backlog drains at its recent release rate."""
    drain = tier.drain
    while drain and drain[0][0] < now - DRAIN_WINDOW_S:
        drain.popleft()
    if not drain:
        return DEFAULT_RETRY_AFTER_S
    released = sum(size for _, size in drain)
    if not released:
        return DEFAULT_RETRY_AFTER_S
    rate = released / max(now - drain[0][0], 1.0)
    return min(MAX_RETRY_AFTER_S, max(MIN_RETRY_AFTER_S, tier.depth / rate))


def nearest_rank(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of a sorted, non-empty sequence: the smallest sample with at
    least q of the samples at or below it."""
    # rank = ceil(q * n); rounded first so that 0.07 * 100 = 7.000000000000001 ranks 7, not 8.
    rank = math.ceil(round(q * len(ordered), 9))
    return ordered[max(0, min(len(ordered), rank) - 1)]


def summarise_waits(waits: Sequence[float]) -> WaitSummary:
    if not waits:
        return WaitSummary(0, None, None, None, None, None)
    ordered = sorted(waits)
    return WaitSummary(
        count=len(ordered),
        mean_s=sum(ordered) / len(ordered),
        p50_s=nearest_rank(ordered, 0.50),
        p90_s=nearest_rank(ordered, 0.90),
        p99_s=nearest_rank(ordered, 0.99),
        max_s=ordered[-1],
    )


def scheduler_stats(
    now: float,
    tiers: Sequence[TierBook],
    *,
    in_flight: int,
    awaiting: int,
    max_in_flight: int,
    max_awaiting: int,
    reserved: int,
    recent: list[tuple[str, float, int, int, float]],
    shares: dict[str, int] | None = None,
    work: dict[str, int] | None = None,
    limiter: AwaitingLimit | None = None,
    feed: int | None = None,
    sequences: int | None = None,
) -> SchedulerStats:
    counts = shares or {}
    window = sum(counts.values())
    work = work or {}
    total = sum(work.values())
    baseline_s, recent_s = limiter.latencies(now) if limiter is not None else (None, None)
    return SchedulerStats(
        now=now,
        in_flight=in_flight,
        awaiting_first_token=awaiting,
        max_in_flight=max_in_flight,
        max_awaiting_first_token=max_awaiting,
        reserved_slots=reserved,
        tiers={
            t.name: TierStats(
                name=t.name,
                priority=t.priority,
                depth=t.depth,
                queued_tokens=t.queued_tokens,
                in_flight=t.in_flight,
                awaiting_first_token=t.awaiting,
                effective_wait_s=t.effective_wait(),
                adaptive_active=t.adaptive_active(),
                ready=t.ready(now),
                released=t.released,
                cancelled=t.cancelled,
                rejections=dict(t.rejections),
                queue_wait=summarise_waits(t.waits),
                last_padding_ratio=t.last_padding,
                release_share=counts.get(t.name, 0) / window if window else None,
                work_share=work.get(t.name, 0) / total if total else None,
            )
            for t in tiers
        },
        recent_releases=[ReleaseRecord(*r) for r in recent],
        awaiting_limit_adaptive=limiter is not None and limiter.adaptive,
        first_token_baseline_s=baseline_s,
        first_token_recent_s=recent_s,
        engine_waiting=limiter.engine_reading if limiter is not None else None,
        awaiting_feed=feed,
        engine_sequences=sequences,
    )
