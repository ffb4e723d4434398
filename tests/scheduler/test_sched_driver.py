"""The asyncio driver on the real event loop and clock, with short waits."""

from __future__ import annotations

import asyncio
import random

import pytest

from scheduler import (
    QUEUE_FULL,
    QUEUE_TIMEOUT,
    SHUTTING_DOWN,
    AsyncDispatcher,
    Dispatcher,
    Rejected,
    Request,
)
from tests.scheduler.sched_helpers import make_config

FAST = {
    "online": {"max_waiting_time_ms": 1},
    "batch": {"max_waiting_time_ms": 2},
    "offline": {"max_waiting_time_ms": 3},
}


def driver(**admission: int) -> AsyncDispatcher:
    return AsyncDispatcher(Dispatcher(make_config(queues=FAST, admission=admission or None)))


def assert_empty(drv: AsyncDispatcher) -> None:
    stats = drv.stats()
    assert stats.in_flight == 0 and stats.awaiting_first_token == 0
    assert all(t.depth == 0 and t.in_flight == 0 for t in stats.tiers.values())
    assert drv.waiting == 0


async def test_a_lone_request_goes_on_arrival_not_after_its_window() -> None:
    # The seed's own windows (200 ms for offline): a free slot is never left idle.
    drv = AsyncDispatcher(Dispatcher(make_config()))
    loop = asyncio.get_running_loop()
    started = loop.time()
    ticket = await asyncio.wait_for(drv.acquire(Request("a", "offline", 10, 10)), 2)
    assert loop.time() - started < 0.1
    async with ticket:
        ticket.first_token()
    assert ticket.released and not ticket.promoted
    ticket.release()  # idempotent
    assert_empty(drv)
    await drv.aclose()


async def test_engine_readings_reach_the_limit_and_promotions_the_ticket() -> None:
    config = make_config(admission={"max_in_flight": 1, "min_share": 0.2})
    drv = AsyncDispatcher(Dispatcher(config))
    tickets = []
    for i in range(3):
        ticket = await drv.acquire(Request(f"o{i}", "online", 10, 10))
        ticket.first_token(timed=False)
        tickets.append(ticket)
        ticket.release()
    drv.engine_waiting(3)
    assert drv.stats().engine_waiting == 3
    holder = await drv.acquire(Request("o3", "online", 10, 10))
    low = asyncio.create_task(drv.acquire(Request("off", "offline", 10, 10)))
    high = asyncio.create_task(drv.acquire(Request("on", "online", 10, 10)))
    await asyncio.sleep(0.005)
    holder.release()
    promoted = await asyncio.wait_for(low, 1)  # offline had no share of the last four
    assert promoted.promoted and not high.done()
    promoted.release()
    (await asyncio.wait_for(high, 1)).release()
    assert_empty(drv)


async def test_a_first_token_lets_the_next_waiter_through() -> None:
    drv = driver(max_awaiting_first_token=1)
    first = await drv.acquire(Request("a", "online", 10, 10))
    second = asyncio.create_task(drv.acquire(Request("b", "online", 10, 10)))
    await asyncio.sleep(0.01)
    assert not second.done()
    first.first_token()
    ticket = await asyncio.wait_for(second, 1)
    assert ticket.request.id == "b"
    first.release()
    ticket.release()
    assert_empty(drv)


async def test_cancelled_while_queued_leaves_no_entry() -> None:
    drv = driver(max_in_flight=1)
    holder = await drv.acquire(Request("a", "online", 10, 10))
    waiter = asyncio.create_task(drv.acquire(Request("b", "batch", 10, 10)))
    await asyncio.sleep(0.005)
    assert drv.stats().tiers["batch"].depth == 1
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert drv.stats().tiers["batch"].depth == 0
    holder.release()
    assert_empty(drv)


async def test_cancelled_right_after_release_gives_the_slot_back() -> None:
    drv = driver(max_in_flight=1)
    holder = await drv.acquire(Request("a", "online", 10, 10))
    waiter = asyncio.create_task(drv.acquire(Request("b", "online", 10, 10)))
    await asyncio.sleep(0.005)
    holder.release()  # schedules a pump
    await asyncio.sleep(0)  # the pump releases "b" to the waiter, which has not resumed yet
    assert drv.dispatcher.is_in_flight("b") and not waiter.done()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert_empty(drv)


async def test_rejections_reach_the_caller() -> None:
    queues = {"online": {"max_queue_depth": 1, "queue_timeout_ms": 20, "max_waiting_time_ms": 1}}
    drv = AsyncDispatcher(Dispatcher(make_config(queues=queues, admission={"max_in_flight": 1})))
    holder = await drv.acquire(Request("a", "online", 10, 10))
    queued = asyncio.create_task(drv.acquire(Request("b", "online", 10, 10)))
    await asyncio.sleep(0)
    with pytest.raises(Rejected) as full:
        await drv.acquire(Request("c", "online", 10, 10))
    assert full.value.reason == QUEUE_FULL and full.value.status == 429
    assert full.value.retry_after_s is not None
    with pytest.raises(Rejected) as late:
        await asyncio.wait_for(queued, 2)
    assert late.value.reason == QUEUE_TIMEOUT and late.value.status == 503
    holder.release()
    assert_empty(drv)


async def test_aclose_refuses_queued_waiters() -> None:
    drv = driver(max_in_flight=1)
    holder = await drv.acquire(Request("a", "online", 10, 10))
    waiter = asyncio.create_task(drv.acquire(Request("b", "offline", 10, 10)))
    await asyncio.sleep(0)
    await drv.aclose()
    with pytest.raises(Rejected) as info:
        await waiter
    assert info.value.reason == SHUTTING_DOWN and info.value.status == 503
    with pytest.raises(Rejected):
        await drv.acquire(Request("c", "online", 10, 10))
    holder.release()
    assert drv.stats().in_flight == 0


async def test_reconfigure_through_the_driver_keeps_waiters() -> None:
    drv = driver(max_in_flight=1)
    holder = await drv.acquire(Request("a", "online", 10, 10))
    waiter = asyncio.create_task(drv.acquire(Request("b", "batch", 10, 10)))
    await asyncio.sleep(0)
    drv.reconfigure(make_config(queues=FAST, admission={"max_in_flight": 2}, drop=("batch",)))
    ticket = await asyncio.wait_for(waiter, 1)
    assert drv.dispatcher.tier_of("b") == "offline"
    ticket.release()
    holder.release()
    assert_empty(drv)


async def test_many_submitters_with_random_cancellations_leak_nothing() -> None:
    rng = random.Random(7)
    drv = driver(max_in_flight=8, max_awaiting_first_token=3, reserved_slots=2)
    served: list[str] = []
    tiers = ["online", "batch", "offline"]

    async def client(i: int) -> None:
        req = Request(f"r{i}", rng.choice(tiers), rng.randint(1, 3000), rng.randint(1, 500))
        async with await drv.acquire(req) as ticket:
            assert drv.stats().in_flight <= 8
            await asyncio.sleep(rng.random() * 0.002)
            ticket.first_token()
            await asyncio.sleep(rng.random() * 0.004)
            served.append(req.id)

    tasks = [asyncio.create_task(client(i)) for i in range(300)]
    for _ in range(40):
        await asyncio.sleep(rng.random() * 0.003)
        for task in rng.sample(tasks, 3):
            task.cancel()
    results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30)
    cancelled = sum(isinstance(r, asyncio.CancelledError) for r in results)
    assert all(r is None or isinstance(r, asyncio.CancelledError) for r in results)
    assert cancelled > 0 and len(served) + cancelled == 300
    assert_empty(drv)
    await drv.aclose()


async def test_a_pump_that_finds_its_waiter_cancelled_leaks_nothing() -> None:
    drv = driver(max_in_flight=1)
    holder = await drv.acquire(Request("a", "online", 10, 10))
    waiter = asyncio.create_task(drv.acquire(Request("b", "online", 10, 10)))
    await asyncio.sleep(0.005)
    holder.release()  # the pump is scheduled first ...
    waiter.cancel()  # ... so it releases "b" to a waiter whose future is already cancelled
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert_empty(drv)
    again = await asyncio.wait_for(drv.acquire(Request("c", "online", 10, 10)), 1)
    again.release()
    assert_empty(drv)
