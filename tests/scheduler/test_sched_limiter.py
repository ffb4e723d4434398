"""The adaptive awaiting-first-token limit (scheduler/limiter.py), on a fake clock.

The engine is the discrete-event model in sched_engine.py; "direct" is the same engine with
the gateway's limits out of the way, so every ratio below compares like with like.
"""

from __future__ import annotations

import statistics

import pytest

from scheduler import Dispatcher
from scheduler.limiter import DRAIN_S, INITIAL_LIMIT, RATE_WINDOW_S, AwaitingLimit, RecentEvents
from tests.scheduler.sched_engine import EngineRun, poisson, run_engine
from tests.scheduler.sched_helpers import make_config

DIRECT = {"max_awaiting_first_token": 100_000, "max_in_flight": 100_000}


def both(
    rate: float, *, slots: int, prefill_s: float, decode_s: float, **kw: object
) -> tuple[EngineRun, EngineRun, Dispatcher]:
    runs = []
    gateway = Dispatcher(make_config())  # the seed verbatim: the limit adapts
    for d in (gateway, Dispatcher(make_config(admission=DIRECT))):
        arrivals = poisson(rate, 60)
        runs.append(
            run_engine(
                d, arrivals, slots=slots, prefill_s=prefill_s, decode_s=decode_s, until=60, **kw
            )
        )
    return runs[0], runs[1], gateway


def test_a_fixed_cap_never_moves() -> None:
    limit = AwaitingLimit(4, ceiling=256)
    for i in range(100):
        limit.held_back()
        limit.sample(0.02 if i % 2 else 2.0, i * 0.01)
    assert limit.value == 4 and not limit.adaptive


def test_the_limit_grows_only_while_it_holds_requests_back() -> None:
    limit = AwaitingLimit(None, ceiling=64)
    for i in range(50):
        limit.sample(0.02, i * 0.01)  # nothing held back: an idle gateway stays put
    assert limit.value == INITIAL_LIMIT
    for i in range(30):
        limit.held_back()
        limit.sample(0.02, 1 + i * 0.01)
    assert limit.value == INITIAL_LIMIT + 30
    for i in range(100):
        limit.held_back()
        limit.sample(0.02, 2 + i * 0.01)
    assert limit.value == 64  # never above max_in_flight


def test_queueing_in_the_engine_cuts_the_limit() -> None:
    limit = AwaitingLimit(None, ceiling=256)
    for i in range(300):
        limit.held_back()
        limit.sample(0.02, i * 0.001)
    assert limit.value == 256
    for i in range(2000):
        limit.held_back()
        limit.sample(0.5, 1 + i * 0.001)  # 25x the no-queue latency
    assert limit.value <= 4


def test_an_idle_engine_reading_grows_the_limit_despite_late_first_tokens() -> None:
    limit = AwaitingLimit(None, ceiling=256)
    limit.sample(0.02, 0.0)
    for i in range(400):
        limit.held_back()
        limit.sample(0.5, 0.001 * i)  # a CPU-starved gateway sees first tokens late
    low = limit.value
    assert low < INITIAL_LIMIT
    limit.engine_waiting(0, 0.5)  # ... but the engine says it has no queue
    for i in range(10):
        limit.held_back()
        limit.sample(0.5, 0.5 + 0.01 * i)
    assert limit.value == low + 10
    limit.engine_waiting(3, 1.5)  # a queue: the latency test applies again
    for i in range(400):
        limit.held_back()
        limit.sample(0.5, 1.5 + 0.001 * i)
    assert limit.value < low + 10
    for i in range(10):  # no reading for a while: latency alone
        limit.held_back()
        limit.sample(0.5, 5.0 + 0.01 * i)
    assert limit.value < low + 10


def test_latency_is_compared_within_a_tier() -> None:
    # Offline prompts take 8x the prefill of online ones: that is no queueing.
    limit = AwaitingLimit(None, ceiling=256)
    for i in range(1000):
        limit.held_back()
        tier, latency = ("offline", 0.16) if i % 3 == 0 else ("online", 0.02)
        limit.sample(latency, i * 0.005, tier)
    assert limit.value > 200


def test_below_saturation_the_gateway_holds_nothing_back() -> None:
    # 300 req/s against an engine with 20 ms TTFT and room for everything: the old fixed cap
    # of 4 awaiting allowed 4 / 20 ms = 200 req/s.
    gw, direct, _ = both(300, slots=100_000, prefill_s=0.02, decode_s=0.015)
    assert gw.done == direct.done
    waits = [gw.released_at[r] - gw.arrived_at[r] for r in gw.released_at]
    assert statistics.median(waits) == 0.0
    assert max(waits) < 0.005


def test_a_slow_engine_is_not_throttled_to_the_limit_over_its_ttft() -> None:
    # A CPU vLLM: 200 ms to a first token, plenty of sequences; 60 req/s needs ~12 awaiting.
    gw, direct, _ = both(60, slots=1000, prefill_s=0.2, decode_s=0.5)
    assert gw.done >= 0.995 * direct.done
    assert statistics.median(gw.ttfts()) == pytest.approx(statistics.median(direct.ttfts()))


@pytest.mark.parametrize(
    ("slots", "prefill_s", "decode_s"), [(32, 0.05, 2.0), (16, 0.03, 1.0), (64, 0.005, 0.1)]
)
def test_when_saturated_the_engine_stays_busy_and_its_queue_short(
    slots: int, prefill_s: float, decode_s: float
) -> None:
    capacity = slots / (prefill_s + decode_s)
    gw, direct, d = both(2 * capacity, slots=slots, prefill_s=prefill_s, decode_s=decode_s)
    assert gw.done >= 0.995 * direct.done
    half = len(gw.engine_queue_samples) // 2
    gw_queue = statistics.mean(gw.engine_queue_samples[half:])
    direct_queue = statistics.mean(direct.engine_queue_samples[half:])
    # The most urgent tier of a priority engine may keep DRAIN_S of its backlog there (it is
    # served first and FIFO there as here), plus the limiter's few; the rest stays here.
    bound = 8 + 1.2 * DRAIN_S * capacity
    assert direct_queue > 100 and gw_queue <= min(bound, direct_queue / 10)
    assert d.queued > 100  # the backlog is in the gateway, where the tiers order it


def test_an_fcfs_engine_keeps_only_the_limiters_few() -> None:
    slots, prefill_s, decode_s = 32, 0.05, 2.0
    capacity = slots / (prefill_s + decode_s)
    fcfs = Dispatcher(make_config(admission={"pass_priority": False}))
    gw = run_engine(
        fcfs,
        poisson(2 * capacity, 60),
        slots=slots,
        prefill_s=prefill_s,
        decode_s=decode_s,
        until=60,
    )
    half = len(gw.engine_queue_samples) // 2
    assert statistics.mean(gw.engine_queue_samples[half:]) <= 20


def test_the_engine_reading_keeps_the_limit_up_when_latency_misleads() -> None:
    gw, direct, d = both(
        2 * 32 / 2.05, slots=32, prefill_s=0.05, decode_s=2.0, report_waiting_every_s=1.0
    )
    assert gw.done >= 0.995 * direct.done
    assert d.stats(60.0).engine_waiting is not None


def test_recent_events_hold_one_window_only() -> None:
    # The dispatcher adds every ended request; it reads the rate only while online is backed
    # up. Pruned on add, the times of a long quiet-online run do not pile up.
    events = RecentEvents()
    for i in range(10_000):
        events.add(i * 0.01)  # 100 events a second for 100 s
    assert len(events._times) <= 100 * RATE_WINDOW_S + 1
    assert events.per_s(99.99) == pytest.approx(100, rel=0.01)
    assert events.count(200.0) == 0
