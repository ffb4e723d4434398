"""Dispatcher micro-benchmark (a script, not a test): one core, fake clock, no asyncio.

    .venv/bin/python lab/bench_scheduler.py [--pairs N] [--decisions N]

1. throughput: arrive + release (+ first token + complete) pairs per second with the seed's
   three tiers, a poll after every 8 arrivals and after every arrival;
2. per-decision cost with a backlog across three tiers: every slot is busy, and each decision
   is one completion + one poll that releases the next request, with an arrival and a cancel
   of a random queued request to keep the depth constant; p50/p99 of the poll, the arrival
   and the cancel, at 100, 1k, 10k and 100k queued.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadgen import percentile
from scheduler import Dispatcher, Request, TierConfig, config_to_dict, default_config, parse_config

TIERS = ("online", "batch", "offline")


def seed_config(**admission: int) -> TierConfig:
    """Seed 000's tiers, with length groups on batch and offline and the given admission."""
    doc = config_to_dict(default_config())
    queues = doc["scheduler"]["queues"]
    queues["batch"]["length_groups"] = [512, 2048]
    queues["offline"]["length_groups"] = [512, 2048, 8192]
    doc["scheduler"]["admission"] = admission
    return parse_config(doc)


def throughput(pairs: int, poll_every: int) -> tuple[float, float]:
    """Pairs per wall-clock second and per CPU second of this process (the shared machine's
    other load inflates wall time; CPU time is what one core actually spent)."""
    rng = random.Random(1)
    d = Dispatcher(seed_config(max_in_flight=256, max_awaiting_first_token=64))
    reqs = [Request(f"r{i}", rng.choice(TIERS), rng.randint(16, 4000), 256) for i in range(pairs)]
    now = 0.0
    released = 0
    start = time.perf_counter()
    cpu_start = time.process_time()
    for i, req in enumerate(reqs):
        now += 0.0001
        d.arrive(req, now)
        if i % poll_every == poll_every - 1:
            for out in d.poll(now).released:
                d.first_token(out.id, now)
                d.complete(out.id, now)
                released += 1
    while released < pairs:  # drain what is left, still timed
        now += 0.05
        for out in d.poll(now).released:
            d.complete(out.id, now)
            released += 1
    return pairs / (time.perf_counter() - start), pairs / (time.process_time() - cpu_start)


def percentile_us(samples_ns: list[int], q: float) -> float:
    return percentile([float(s) for s in samples_ns], q) / 1000.0  # ns -> us


def decisions(depth: int, count: int) -> dict[str, float]:
    rng = random.Random(depth)
    d = Dispatcher(seed_config(max_in_flight=64, max_awaiting_first_token=64))
    seq = 0
    now = 0.0
    queued: list[str] = []

    def new_request() -> Request:
        nonlocal seq
        seq += 1
        return Request(f"r{seq}", TIERS[seq % 3], rng.randint(16, 10000), 256)

    for _ in range(depth + 64):
        req = new_request()
        d.arrive(req, now)
        queued.append(req.id)
    now = 1.0
    flying = [r.id for r in d.poll(now).released]  # fills every slot
    poll_ns: list[int] = []
    arrive_ns: list[int] = []
    cancel_ns: list[int] = []
    clock = time.perf_counter_ns
    for _ in range(count):
        now += 0.0001
        d.complete(flying.pop(rng.randrange(len(flying))), now)
        t0 = clock()
        result = d.poll(now)
        t1 = clock()
        poll_ns.append(t1 - t0)
        flying.extend(r.id for r in result.released)
        req = new_request()
        t0 = clock()
        d.arrive(req, now)
        t1 = clock()
        arrive_ns.append(t1 - t0)
        queued.append(req.id)
        # cancel a random queued request (swap-remove keeps this list O(1) too); ids that
        # were released meanwhile are dropped from the list on the way
        while True:
            index = rng.randrange(len(queued))
            victim = queued[index]
            queued[index] = queued[-1]
            queued.pop()
            if d.is_queued(victim):
                break
        t0 = clock()
        d.cancel(victim, now)
        t1 = clock()
        cancel_ns.append(t1 - t0)
        req = new_request()
        d.arrive(req, now)
        queued.append(req.id)
    depth_now = sum(t.depth for t in d.stats(now).tiers.values())
    return {
        "depth": float(depth_now),
        "poll_p50": percentile_us(poll_ns, 50),
        "poll_p99": percentile_us(poll_ns, 99),
        "poll_mean": statistics.fmean(poll_ns) / 1000.0,
        "arrive_p99": percentile_us(arrive_ns, 99),
        "cancel_p99": percentile_us(cancel_ns, 99),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=200_000)
    parser.add_argument("--decisions", type=int, default=20_000)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}")
    for every in (8, 1):
        wall, cpu = throughput(args.pairs, every)
        print(
            f"throughput, poll every {every} arrival(s): {wall:,.0f} arrive+release pairs/s wall,"
            f" {cpu:,.0f} per CPU second"
        )
    print("queued   poll p50 us  poll p99 us  poll mean us  arrive p99 us  cancel p99 us")
    for depth in (100, 1_000, 10_000, 100_000):
        r = decisions(depth, args.decisions)
        print(
            f"{int(r['depth']):>7}  {r['poll_p50']:>11.2f}  "
            f"{r['poll_p99']:>11.2f}  {r['poll_mean']:>12.2f}"
            f"  {r['arrive_p99']:>13.2f}  {r['cancel_p99']:>13.2f}"
        )


if __name__ == "__main__":
    main()
