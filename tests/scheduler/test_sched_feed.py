"""The feed of a backed-up most urgent tier (issue 16, item 4; scheduler/awaiting.py `_feed_now`),
on the discrete-event engine of sched_engine.py with vLLM's priority policy (fake clock).

While online is backed up the gateway serves it newest first, but the engine serves its own
queue oldest first within a priority: every online request already waiting there is one more
that a request sent now waits behind. So while backed up, only the limiter's feed of online
requests awaits in the engine as online; releases beyond it go as batch's, as the stale ones
do. After a flood, a new online request then waits behind at most the feed."""

from __future__ import annotations

import statistics

import pytest

from scheduler import Dispatcher
from tests.scheduler.sched_engine import EngineRun, poisson, run_engine
from tests.scheduler.sched_helpers import make_config

MIX = ("online",) * 7 + ("batch",) * 2 + ("offline",)


def flood_then_calm(d: Dispatcher) -> EngineRun:
    """4x the engine's capacity for 20 s (16 sequences of ~1 s streams), then a third of it."""
    arrivals = poisson(64.0, 20.0, MIX, seed=3)
    arrivals += [(20.0 + at, tier) for at, tier in poisson(5.0, 10.0, MIX, seed=4)]
    return run_engine(
        d, arrivals, slots=16, prefill_s=0.03, decode_s=1.0, priority=True,
        report_waiting_every_s=1.0, until=40.0,
    )  # fmt: skip


def online_after(run: EngineRun, lo: float, hi: float) -> list[str]:
    return [r for r, at in run.arrived_at.items() if r.startswith("online") and lo <= at < hi]


@pytest.mark.parametrize("reserve", [0.5, 0.0])
def test_after_a_flood_a_new_online_request_waits_behind_at_most_the_feed(reserve: float) -> None:
    d = Dispatcher(make_config(admission={"recovery_reserve": reserve}))
    run = flood_then_calm(d)
    if reserve:
        # During the flood the engine's queue holds at most the feed of online requests. (Not
        # without the reserve: the stale backlog then goes to the engine as batch's, the
        # gateway's queue is fresh again, not backed up, and the allowance counts those
        # awaiting: online floods the engine's queue until it backs up again. Documented.)
        online = d.config.scheduler.queues["online"].priority
        during = [r for r in online_after(run, 5.0, 20.0) if run.sent_priority.get(r) == online]
        assert len(during) > 100
        assert max(run.ahead[r] for r in during) <= 2
        assert run.mean_running(5.0, 20.0) > 15.9  # and the engine kept busy meanwhile
    first = online_after(run, 20.0, 21.0)
    assert len(first) >= 5
    assert max(run.ahead[r] for r in first) <= 2
    ttft = statistics.median(run.first_token_at[r] - run.arrived_at[r] for r in first)
    # Two ~1/16 s waits for a sequence and a 30 ms prefill; without the feed 0.6-0.7 s.
    assert ttft < 0.4, ttft
    assert d.stats(40.0).awaiting_feed == d.urgent_feed  # what the agent's status shows
    # The limit did not grow while the feed held online back (the engine's queue was short
    # because the gateway kept it short, not because the engine was idle).
    assert d.max_awaiting <= 16


def test_below_a_backlog_online_goes_as_online() -> None:
    # No flood: nothing backs up, so no feed; every online request goes as online.
    d = Dispatcher(make_config())
    run = run_engine(
        d, poisson(8.0, 20.0, MIX, seed=5), slots=16, prefill_s=0.03, decode_s=1.0,
        priority=True, report_waiting_every_s=1.0,
    )  # fmt: skip
    assert d.urgent_feed is None
    assert d.stats(20.0).awaiting_feed is None
    assert run.done == len(run.arrived_at)
