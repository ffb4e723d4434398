"""A discrete-event engine for the admission tests: continuous batching reduced to slots.

`slots` requests run at once; a request that gets a slot produces its first token `prefill_s`
later and finishes `decode_s` after that; the rest wait in the engine's queue: FCFS, or with
`priority` ordered by the engine priority the gateway sends (the tier a release goes as,
`PollResult.sent_as`), FCFS within one, as vLLM's priority policy. The gateway's hop costs
`hop_s` each way. Everything runs on a fake clock, so a test of a minute
of traffic takes milliseconds and gives the same answer every time.
"""

from __future__ import annotations

import heapq
import itertools
import random
from dataclasses import dataclass, field

from scheduler import Dispatcher, Request


@dataclass
class EngineRun:
    released_at: dict[str, float] = field(default_factory=dict)
    first_token_at: dict[str, float] = field(default_factory=dict)  # as the gateway sees it
    arrived_at: dict[str, float] = field(default_factory=dict)
    done: int = 0
    engine_queue_samples: list[int] = field(default_factory=list)
    idle_slot_with_backlog_s: float = 0.0  # engine slot idle while the gateway held requests
    # With `priority`: how many requests of its priority or more urgent were queued in the
    # engine when each request reached it (what it waits behind there).
    ahead: dict[str, int] = field(default_factory=dict)
    sent_priority: dict[str, int] = field(default_factory=dict)  # the priority it went with
    running: list[tuple[float, int]] = field(default_factory=list)  # (time, running) changes

    def mean_running(self, lo: float, hi: float) -> float:
        """Time-weighted mean of the running count over [lo, hi)."""
        total = 0.0
        for (at, count), (nxt, _) in zip(self.running, [*self.running[1:], (hi, 0)], strict=True):
            start, end = max(at, lo), min(nxt, hi)
            if end > start:
                total += count * (end - start)
        return total / (hi - lo)

    def ttfts(self, prefix: str = "") -> list[float]:
        return sorted(
            self.first_token_at[r] - self.arrived_at[r]
            for r in self.first_token_at
            if r.startswith(prefix)
        )


def run_engine(
    d: Dispatcher,
    arrivals: list[tuple[float, str]],  # (time, tier), sorted
    *,
    slots: int,
    prefill_s: float,
    decode_s: float,
    hop_s: float = 0.0005,
    until: float | None = None,
    report_waiting_every_s: float | None = None,
    seed: int = 1,
    priority: bool = False,
    decode_by_tier: dict[str, float] | None = None,
    step_per_running_s: float = 0.0,
    shape_by_tier: dict[str, tuple[int, int]] | None = None,
) -> EngineRun:
    """Decode times vary uniformly within +-50% of `decode_s` (seeded). Requests are 100
    prompt tokens and 10 output tokens, or a tier's (prompt, max tokens) in `shape_by_tier`
    (what the gateway counts as their work; the engine's times are `decode_by_tier`'s)."""
    rng = random.Random(seed)
    run = EngineRun()
    seq = itertools.count()
    events: list[tuple[float, int, str, str]] = []
    for at, tier in arrivals:
        heapq.heappush(events, (at, next(seq), "arrive", tier))
    if report_waiting_every_s:
        heapq.heappush(events, (0.0, next(seq), "scrape", ""))
    # The engine's queue: (engine priority, arrival order, id); all one priority unless
    # `priority`, so FCFS.
    ranked: list[tuple[int, int, str]] = []
    sent_prio: dict[str, int] = {}
    queues = d.config.scheduler.queues
    running = 0
    ids = itertools.count()
    last = 0.0
    end = until if until is not None else float("inf")

    def start_some(now: float) -> None:
        nonlocal running
        while ranked and running < slots:
            rid = heapq.heappop(ranked)[2]
            running += 1
            first = prefill_s + step_per_running_s * running
            heapq.heappush(events, (now + first, next(seq), "token", rid))

    while events:
        now, _, kind, what = heapq.heappop(events)
        if now > end:
            break
        if running < slots and not ranked and d.queued:
            run.idle_slot_with_backlog_s += (now - last) * (slots - running)
        last = now
        if kind == "arrive":
            rid = f"{what}-{next(ids)}"
            run.arrived_at[rid] = now
            prompt, max_tokens = (shape_by_tier or {}).get(what, (100, 10))
            d.arrive(Request(rid, what, prompt, max_tokens), now)
        elif kind == "at_engine":
            prio = run.sent_priority[what] = sent_prio.pop(what)
            if priority:  # O(queue) a request: only where a test reads it
                run.ahead[what] = sum(1 for p, _, _ in ranked if p <= prio)
            heapq.heappush(ranked, (prio, next(seq), what))
            start_some(now)
        elif kind == "token":
            heapq.heappush(events, (now + hop_s, next(seq), "seen", what))
            mean = (decode_by_tier or {}).get(what.rsplit("-", 1)[0], decode_s)
            length = mean * rng.uniform(0.5, 1.5)
            heapq.heappush(events, (now + length, next(seq), "finish", what))
        elif kind == "seen":
            run.first_token_at[what] = now
            d.first_token(what, now)
        elif kind == "finish":
            running -= 1
            run.done += 1
            heapq.heappush(events, (now + hop_s, next(seq), "complete", what))
            start_some(now)
        elif kind == "complete":
            d.complete(what, now)
        elif kind == "scrape":
            d.engine_waiting(len(ranked), now, running=running)
            assert report_waiting_every_s is not None
            heapq.heappush(events, (now + report_waiting_every_s, next(seq), "scrape", ""))
        run.engine_queue_samples.append(len(ranked))
        if not run.running or run.running[-1][1] != running:
            run.running.append((now, running))
        result = d.poll(now)
        for r in result.released:
            run.released_at[r.id] = now
            sent_prio[r.id] = queues[result.sent_as.get(r.id, r.tier)].priority if priority else 0
            heapq.heappush(events, (now + hop_s, next(seq), "at_engine", r.id))
        if kind == "scrape" and not any(e[2] != "scrape" for e in events):
            break
    return run


def poisson(
    rate: float, duration_s: float, tiers: tuple[str, ...] = ("online",), seed: int = 1
) -> list[tuple[float, str]]:
    """Poisson arrivals at `rate`, tiers drawn in turn."""
    rng = random.Random(seed)
    out: list[tuple[float, str]] = []
    at = 0.0
    while True:
        at += rng.expovariate(rate)
        if at >= duration_s:
            return out
        out.append((at, tiers[len(out) % len(tiers)]))
