"""The adaptive limit on released requests still awaiting their first token
(docs/architecture.md#the-dispatchers-semantics).

Why a limit at all: a released request that has not produced its first token is, to the
gateway, waiting or prefilling in the engine. While few such requests exist, the engine's own
queue is short and the gateway's queue (ordered by tier) decides who runs next. Why not a fixed
number: by Little's law a cap of N caps throughput at N / TTFT, so any fixed N is too small
for a slow engine (a CPU build with 200 ms prefill) and needlessly large for a fast one.

The rule, in the spirit of gradient and Vegas-style concurrency limiters, fed only with what
the gateway sees:

- a sample is the first-token latency of a released request (release -> first token), i.e.
  the time it spent in the engine's queue plus its prefill. Samples are compared per tier
  (like with like: a tier's prompts have their own prefill cost);
- `baseline` = the tier's smallest sample of the last `BASELINE_WINDOW_S` seconds: the
  engine's no-queue first-token latency (some requests always find a free slot while the
  engine's queue is short, so the minimum stays honest under load);
- `recent` = an exponentially weighted mean of the tier's samples;
- gradient = clamp(TOLERANCE * baseline / recent, MIN_GRADIENT, 1). Near 1: no queue builds
  in the engine. Below 1: requests queue in the engine, the engine is saturated;
- not saturated, and the limit held a request back since the last sample: the limit grows by
  one per sample (one per first token, so it doubles every round trip, like TCP slow start);
  not held back: it stays (an idle gateway does not inflate it);
- saturated: limit <- limit * gradient + HEADROOM, smoothed. At equilibrium that leaves about
  HEADROOM + TOLERANCE x (slots the engine frees per no-queue TTFT) awaiting: the engine's queue
  is never empty (throughput) but short (the order stays the gateway's);
- the engine's own `vllm:num_requests_waiting`, when its /metrics are scraped (once a
  second), overrides the latency test while fresh: a reading of at most `ENGINE_IDLE_WAITING`
  means the engine has no queue, so a rise in latency is not queueing there (a CPU-starved
  gateway sees first tokens late) and the limit is not cut, and grows while it holds requests
  back; a reading above `ENGINE_SATURATED_WAITING` means it is saturated: no growth.

Pure and deterministic: every input carries `now`; nothing reads a clock.
"""

from __future__ import annotations

import math
from collections import deque

INITIAL_LIMIT = 16
HEADROOM = 2.0
TOLERANCE = 3.0
MIN_GRADIENT = 0.2
SMOOTHING = 0.5  # share of a saturated round trip's correction applied
RECENT_WEIGHT = 0.2  # EWMA weight of the newest sample
BASELINE_WINDOW_S = 30.0
ENGINE_READING_FRESH_S = 2.5  # the agent scrapes /metrics once a second
ENGINE_IDLE_WAITING = 2  # a reading at or under it: not saturated
ENGINE_SATURATED_WAITING = 8
# The most urgent tier, with the engine ordering by priority, may have DRAIN_S seconds' worth
# of its first tokens (its rate over RATE_WINDOW_S) awaiting on top of the limit: about that
# much of its backlog waits in the engine (served first there, FIFO as here), the rest in the
# gateway, where a backed-up queue is served newest first.
DRAIN_S = 0.5
RATE_WINDOW_S = 2.0


class RecentEvents:
    """How many events (first tokens of a tier; requests ended, any tier) fell in the last
    RATE_WINDOW_S. Pruned on every add, so it holds at most one window's worth."""

    __slots__ = ("_times",)

    def __init__(self) -> None:
        self._times: deque[float] = deque()

    def add(self, now: float) -> None:
        self._times.append(now)
        self.count(now)

    def count(self, now: float) -> int:
        times = self._times
        while times and times[0] < now - RATE_WINDOW_S:
            times.popleft()
        return len(times)

    def per_s(self, now: float) -> float:
        return self.count(now) / RATE_WINDOW_S

    def falls_below(self, keep: int, now: float) -> float | None:
        """When the count, `keep` or more now, first falls below `keep` by time alone (None:
        `keep` under 1, or more than the count now)."""
        count = self.count(now)
        if keep < 1 or keep > count:
            return None
        # An event exactly RATE_WINDOW_S old still counts: it is gone an instant later.
        return max(self._times[count - keep] + RATE_WINDOW_S, math.nextafter(now, math.inf))


class LatencyTrack:
    """One tier's first-token latencies: the windowed minimum and a weighted mean."""

    __slots__ = ("_firsts", "_window", "recent_s")

    def __init__(self) -> None:
        self._firsts = RecentEvents()  # the last RATE_WINDOW_S's samples
        # Monotonic deque of (time, latency): increasing latencies, so the head is the minimum.
        self._window: deque[tuple[float, float]] = deque()
        self.recent_s: float | None = None

    def add(self, latency_s: float, now: float) -> None:
        window = self._window
        while window and window[-1][1] >= latency_s:
            window.pop()
        window.append((now, latency_s))
        self._firsts.add(now)
        if self.recent_s is None:
            self.recent_s = latency_s
        else:
            self.recent_s += RECENT_WEIGHT * (latency_s - self.recent_s)

    def drained(self, now: float) -> int:
        """First tokens of the last RATE_WINDOW_S seconds."""
        return self._firsts.count(now)

    def baseline_s(self, now: float) -> float | None:
        window = self._window
        # Keep the newest sample even when old: a quiet spell must not forget the baseline.
        while len(window) > 1 and window[0][0] < now - BASELINE_WINDOW_S:
            window.popleft()
        return window[0][1] if window else None

    def gradient(self, now: float) -> float:
        base = self.baseline_s(now)
        if base is None or self.recent_s is None or self.recent_s <= 0:
            return 1.0
        return max(MIN_GRADIENT, min(1.0, TOLERANCE * base / self.recent_s))


class AwaitingLimit:
    """The current limit (`value`) on in-flight requests awaiting their first token."""

    __slots__ = (
        "_engine_at",
        "_engine_waiting",
        "_held_back",
        "_limit",
        "_since_cut",
        "_tracks",
        "ceiling",
        "fixed",
    )

    def __init__(self, fixed: int | None, ceiling: int) -> None:
        self.fixed = fixed
        self.ceiling = max(1, ceiling)
        self._limit = float(INITIAL_LIMIT)  # `value` clamps it to the ceiling
        self._tracks: dict[str, LatencyTrack] = {}
        self._held_back = False
        self._since_cut = 0  # samples since the limit was last cut: one cut per round trip
        self._engine_waiting: int | None = None
        self._engine_at = 0.0

    @property
    def adaptive(self) -> bool:
        return self.fixed is None

    @property
    def value(self) -> int:
        if self.fixed is not None:
            return self.fixed
        return max(1, min(self.ceiling, int(self._limit)))

    def set_ceiling(self, ceiling: int) -> None:
        """`max_in_flight` changed (reconfigure): the limit never exceeds it."""
        self.ceiling = max(1, ceiling)

    def latencies(self, now: float) -> tuple[float | None, float | None]:
        """(baseline, recent) of the tier with the lowest baseline, for stats."""
        best: tuple[float | None, float | None] = (None, None)
        for track in self._tracks.values():
            base = track.baseline_s(now)
            if base is not None and (best[0] is None or base < best[0]):
                best = (base, track.recent_s)
        return best

    def drain_allowance(self, key: str, now: float) -> int:
        """Tier `key`'s first tokens per DRAIN_S, at its rate of the last RATE_WINDOW_S
        (0: a fixed limit, or no sample yet)."""
        track = self._tracks.get(key)
        if self.fixed is not None or track is None:
            return 0
        return math.ceil(track.drained(now) * DRAIN_S / RATE_WINDOW_S)

    def feed(self, key: str, now: float) -> int | None:
        """What of tier `key` should await in the engine while its backlog waits here, newest
        first: the first tokens it gets per no-queue first-token latency (at its rate of the
        last RATE_WINDOW_S), plus one, so that a freed sequence finds one ready. None: a fixed
        limit, or no sample yet."""
        track = self._tracks.get(key)
        if self.fixed is not None or track is None:
            return None
        base = track.baseline_s(now)
        if base is None:
            return None
        return math.ceil(track.drained(now) * base / RATE_WINDOW_S) + 1

    def held_back(self) -> None:
        """The dispatcher kept a request queued because the limit was reached."""
        self._held_back = True

    def engine_waiting(self, count: int, now: float) -> None:
        """The engine's own waiting-queue length, from its /metrics."""
        self._engine_waiting = count
        self._engine_at = now

    @property
    def engine_reading(self) -> int | None:
        return self._engine_waiting

    def sample(self, latency_s: float, now: float, key: str = "") -> None:
        """A released request of tier `key` had its first token `latency_s` after release."""
        if latency_s < 0:
            return
        track = self._tracks.get(key)
        if track is None:
            track = self._tracks[key] = LatencyTrack()
        track.add(latency_s, now)
        if self.fixed is not None:
            return
        held_back, self._held_back = self._held_back, False
        fresh = now - self._engine_at <= ENGINE_READING_FRESH_S
        engine = self._engine_waiting if fresh else None
        if engine is not None and engine <= ENGINE_IDLE_WAITING:
            gradient = 1.0  # the engine has no queue: late first tokens are not queueing there
        else:
            gradient = track.gradient(now)
        if gradient >= 1.0:
            if held_back and (engine is None or engine <= ENGINE_SATURATED_WAITING):
                self._limit = min(float(self.ceiling), min(self._limit, self.ceiling) + 1.0)
            return
        self._since_cut += 1
        if self._since_cut < self._limit:
            return  # the samples of this round trip were sent before the last cut
        self._limit = min(self._limit, float(self.ceiling))
        target = self._limit * gradient + HEADROOM
        if target < self._limit:
            self._limit = max(1.0, self._limit + SMOOTHING * (target - self._limit))
            self._since_cut = 0
