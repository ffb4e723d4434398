"""The engine's scheduling policy as the dispatcher is told it (`engine_policy`): with the
config's `pass_priority` it decides whether a less urgent request awaiting its first token in
the engine holds a more urgent release; it outlives a reconfigure, and the driver polls when
it changes."""

from __future__ import annotations

import asyncio

from scheduler import AsyncDispatcher, Dispatcher, Request, TierConfig
from tests.scheduler.sched_helpers import make_config


def one_awaiting(pass_priority: bool = True) -> TierConfig:
    return make_config(admission={"max_awaiting_first_token": 1, "pass_priority": pass_priority})


def ids(requests: list[Request]) -> list[str]:
    return [r.id for r in requests]


def held_online(d: Dispatcher) -> None:
    """A batch request awaits its first token; an online one arrives after it."""
    d.arrive(Request("b1", "batch", 10, 10), 0.0)
    assert ids(d.poll(0.0).released) == ["b1"]
    d.arrive(Request("o1", "online", 10, 10), 0.001)


def test_an_fcfs_engine_s_awaiting_request_holds_the_urgent_tier() -> None:
    d = Dispatcher(one_awaiting())
    d.engine_policy(priority=False)
    assert not d.engine_priority
    held_online(d)
    assert d.poll(0.001).released == []
    d.engine_policy(priority=True)  # the engine restarted with the priority policy
    assert ids(d.poll(0.002).released) == ["o1"]


def test_the_engine_s_policy_outlives_a_reconfigure_and_the_config_s_flag_still_counts() -> None:
    d = Dispatcher(one_awaiting())
    d.engine_policy(priority=False)
    d.reconfigure(one_awaiting(), 0.0)
    assert not d.engine_priority  # the engine's, not the config's: a reconfigure keeps it
    d.engine_policy(priority=True)
    assert d.engine_priority
    d.reconfigure(one_awaiting(pass_priority=False), 0.0)
    assert not d.engine_priority  # the gateway sends no priority: nothing for the engine to order
    d.reconfigure(one_awaiting(), 0.0)
    assert d.engine_priority


async def test_the_driver_polls_when_the_engine_s_policy_changes() -> None:
    d = Dispatcher(one_awaiting())
    drv = AsyncDispatcher(d)
    drv.engine_policy(priority=False)
    batch = await asyncio.wait_for(drv.acquire(Request("b1", "batch", 10, 10)), 1)
    online = asyncio.ensure_future(drv.acquire(Request("o1", "online", 10, 10)))
    for _ in range(3):
        await asyncio.sleep(0)
    assert not online.done() and d.is_queued("o1")  # b1 awaits ahead of it in an fcfs engine
    drv.engine_policy(priority=True)  # no other event: the change alone releases it
    ticket = await asyncio.wait_for(online, 1)
    assert ticket.request.id == "o1"
    ticket.release()
    batch.release()
    await drv.aclose()
