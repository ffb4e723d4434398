"""A tier's queue as the dispatcher keeps it: FIFO deques per length group, running sums and
counters.

Data layout, chosen so that no decision costs time in proportion to queue depth:
- each tier holds one FIFO deque per length group; entries are appended in arrival order, so
  the head of each deque is its oldest request and the tier's oldest is the oldest head;
- request count and prompt+max token sums per tier are kept up to date on every event;
- cancelling a queued request only marks its entry dead (O(1)); dead entries are skipped when
  they reach a head and swept in one pass once they outnumber the live ones (amortised O(1)).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque

from scheduler.config import TierConfig
from scheduler.stats import TierBook
from scheduler.types import QUEUE_TIMEOUT, Request

SWEEP_MIN_DEAD = 64  # below this, dead entries are cheaper to skip than to sweep


class Entry:
    __slots__ = ("alive", "arrived", "req", "seq", "tier", "tokens")

    def __init__(self, req: Request, arrived: float, seq: int, tier: TierQueue) -> None:
        self.req = req
        self.arrived = arrived
        self.seq = seq
        self.tier = tier
        self.tokens = req.prompt_tokens + req.max_tokens
        self.alive = True


class Flight:
    """A released request. `counted` is the tier whose awaiting count it is in: its own, or
    the tier its age bound promoted it to (the engine sees it with that tier's priority).
    `owed`: released by the starvation bound (counted in its tier's `owed_awaiting` until its
    first token)."""

    __slots__ = ("awaiting", "counted", "owed", "released_at", "req", "tier")

    def __init__(
        self,
        req: Request,
        tier: TierQueue,
        released_at: float,
        counted: TierQueue,
        owed: bool = False,
    ) -> None:
        self.req = req
        self.tier = tier
        self.counted = counted
        self.released_at = released_at
        self.awaiting = True
        self.owed = owed

    def settle(self) -> None:
        """It no longer awaits its first token (it has one, or it ended): uncount it."""
        self.awaiting = False
        self.counted.awaiting -= 1
        self.tier.owed_awaiting -= self.owed


class TierQueue(TierBook):
    """A queue's configuration, its pending requests and its counters."""

    __slots__ = (
        "bounds",
        "dead",
        "groups",
        "lifo_s",
        "max_batch",
        "max_depth",
        "max_tokens",
        "promote_s",
        "rank",
        "reduced_wait_s",
        "stale_s",
        "threshold",
        "timeout_s",
        "wait_s",
    )

    def __init__(self, name: str, config: TierConfig, rank: int) -> None:
        super().__init__(name)
        self.rank = rank
        self.configure(config, rank)
        self.groups: list[deque[Entry]] = [deque() for _ in range(len(self.bounds) + 1)]
        self.dead = 0

    def configure(self, config: TierConfig, rank: int) -> None:
        q = config.scheduler.queues[self.name]
        adaptive = config.scheduler.adaptive
        admission = config.scheduler.admission
        self.priority = q.priority
        self.max_batch = q.max_batch_size
        self.max_tokens = q.max_tokens_per_batch
        self.max_depth = q.max_queue_depth
        # The queue's own timeout, else the default sojourn bound (admission.shed_after_ms).
        timeout_ms = (
            q.queue_timeout_ms if q.queue_timeout_ms is not None else admission.shed_after_ms
        )
        self.timeout_s = None if timeout_ms is None else timeout_ms / 1000.0
        self.promote_s = None if q.promote_after_ms is None else q.promote_after_ms / 1000.0
        # Adaptive LIFO serves the most urgent tier only: its late answers are worth least;
        # the lower tiers keep FIFO (their waits are bounded by min_share and the age bound).
        lifo_ms = admission.lifo_after_ms if rank == 0 else None
        self.lifo_s = None if lifo_ms is None else lifo_ms / 1000.0
        # Every tier: a backlog older than this is stale, and the starvation bound's release
        # from it takes the newest request (the oldest's client has most likely given up).
        stale_ms = admission.lifo_after_ms
        self.stale_s = None if stale_ms is None else stale_ms / 1000.0
        self.bounds = list(q.length_groups)
        self.wait_s = q.max_waiting_time_ms / 1000.0
        self.reduced_wait_s = self.wait_s
        self.threshold: int | None = None  # None: adaptive rule off for this tier
        if adaptive.enabled and adaptive.tier == self.name:
            self.reduced_wait_s = self.wait_s * adaptive.wait_time_reduction_ratio
            self.threshold = adaptive.online_pressure_threshold

    def effective_wait(self) -> float:
        if self.threshold is not None and self.depth > self.threshold:
            return self.reduced_wait_s
        return self.wait_s

    def oldest(self) -> Entry | None:
        best: Entry | None = None
        for dq in self.groups:
            while dq and not dq[0].alive:
                dq.popleft()
                self.dead -= 1
            if dq and (best is None or dq[0].seq < best.seq):
                best = dq[0]
        return best

    def ready(self, now: float) -> bool:
        if self.depth == 0:
            return False
        if self.depth >= self.max_batch or self.queued_tokens >= self.max_tokens:
            return True
        oldest = self.oldest()
        return oldest is not None and now >= oldest.arrived + self.effective_wait()

    def backed_up(self, now: float) -> bool:
        """The oldest queued request has waited over `lifo_after_ms`: release newest first."""
        if self.lifo_s is None or not self.depth:
            return False
        oldest = self.oldest()
        return oldest is not None and now - oldest.arrived > self.lifo_s

    def stale(self, now: float) -> bool:
        """The oldest queued request has waited over `lifo_after_ms` (any tier)."""
        if self.stale_s is None or not self.depth:
            return False
        oldest = self.oldest()
        return oldest is not None and now - oldest.arrived > self.stale_s

    def aged(self, now: float) -> Entry | None:
        """The oldest queued request if it has waited `promote_after_ms`, else None."""
        if self.promote_s is None or not self.depth:
            return None
        oldest = self.oldest()
        return oldest if oldest is not None and now >= oldest.arrived + self.promote_s else None

    def adaptive_active(self) -> bool:
        return self.threshold is not None and self.depth > self.threshold

    def put(self, entry: Entry) -> None:
        """Queue `entry` (arrival order within its length group)."""
        self.groups[self.group_of(entry.req.prompt_tokens)].append(entry)
        self.depth += 1
        self.queued_tokens += entry.tokens

    def taken(self, entry: Entry) -> None:
        """`entry` left the queue (released or refused): the running sums follow."""
        self.depth -= 1
        self.queued_tokens -= entry.tokens

    def cancel(self, entry: Entry) -> None:
        """`entry`'s client left while it was queued: it is marked dead where it lies (O(1)),
        and the dead are swept in one pass once they outnumber the live ones."""
        entry.alive = False
        self.taken(entry)
        self.dead += 1
        self.cancelled += 1
        if self.dead > SWEEP_MIN_DEAD and self.dead > self.depth:
            self.sweep()

    def clear(self) -> None:
        """Empty the queue and zero the counts of its requests, queued and in flight: a
        reconfigure counts each of them again where it now belongs (`Backlog.requeue`,
        `Slots.rehome`). The history (released, waits, rejections) stays."""
        self.groups = [deque() for _ in range(len(self.bounds) + 1)]
        self.dead = self.depth = self.queued_tokens = self.in_flight = self.awaiting = 0
        self.owed_awaiting = 0

    def pop_expired(self, now: float) -> list[Entry]:
        """Remove and return the live requests that have waited `timeout_s` (the heads of
        each group, dead ones dropped on the way), counting them as timed out."""
        timeout = self.timeout_s
        out: list[Entry] = []
        if timeout is None:
            return out
        for dq in self.groups:
            # Same expression as the wake-up time, so waking at it always finds the entry due.
            while dq and (not dq[0].alive or dq[0].arrived + timeout <= now):
                entry = dq.popleft()
                if not entry.alive:
                    self.dead -= 1
                    continue
                self.taken(entry)
                out.append(entry)
        if out:
            self.rejections[QUEUE_TIMEOUT] = self.rejections.get(QUEUE_TIMEOUT, 0) + len(out)
        return out

    def group_of(self, prompt_tokens: int) -> int:
        return bisect_left(self.bounds, prompt_tokens) if self.bounds else 0

    def sweep(self) -> None:
        for i, dq in enumerate(self.groups):
            self.groups[i] = deque(e for e in dq if e.alive)
        self.dead = 0
