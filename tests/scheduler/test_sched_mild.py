"""A sustained mild overload (issue 16): the overload rules must not turn it into a cascade.

On a real vLLM at about 1.3x its capacity (dab8174:docs/performance.md, rounds E1-E3) the gateway's
rules for a 10x flood (newest first, the feed, the recovery reserve, no allowance) engaged
whenever online's oldest request had waited a second. The awaiting limit had been cut while
the engine queued, the feed held online to 2 awaiting and the reserve kept the stale backlog
(sent as batch's) out, and since nothing counted as held back by the limit, it never grew
again: the engine ran 9-14 of its 16 sequences with an empty queue while 60-110 online
requests waited in the gateway, newest first, until the oldest were shed at 30 s. Engine
priority alone kept online TTFT P99 under 3 s.

The engine of sched_engine.py reproduces it when its first token takes longer the more it runs
(`step_per_running_s`, as a CPU engine's step does) and online streams are shorter than the
lower tiers'. What must hold: every online request is served, and online TTFT P99 through the
gateway without the starvation bound is engine priority's; with the default bound it pays the
bound's documented price (offline and batch streams hold sequences online would take), not a
cascade (before: x8-x10 of engine priority's P99 and online requests shed, on these seeds).
Requests have the headline workload's sizes, and the bound counts their work (prompt + max
tokens), so an offline release weighs what it costs the engine.
"""

from __future__ import annotations

import pytest

from scheduler import Dispatcher
from tests.scheduler.sched_engine import EngineRun, poisson, run_engine
from tests.scheduler.sched_helpers import make_config

MIX = ("online",) * 7 + ("batch",) * 2 + ("offline",)
DIRECT = {"max_awaiting_first_token": 100_000, "max_in_flight": 100_000}
# The headline workload's (prompt, max tokens) per tier (console/bench/headline/workload.py):
# what the starvation bound counts as each request's work.
SHAPES = {"online": (128, 64), "batch": (512, 128), "offline": (1024, 256)}


def mild_overload(
    admission: dict[str, object] | None,
    seed: int,
    rate: float = 17.0,
    until: float = 90.0,
    shapes: dict[str, tuple[int, int]] | None = SHAPES,
) -> EngineRun:
    """`rate` req/s for 60 s; at 17 online alone needs about 15 of the 16 sequences (1 s
    streams, plus a first token that takes 0.05 s + 15 ms per request running), batch and
    offline stream 2-3 s. As the headline's agent, no launch profile: `max_in_flight` is the
    default 256. `shapes`: the requests' sizes per tier (None: all alike)."""
    d = Dispatcher(make_config(admission=admission), default_max_in_flight=256)
    return run_engine(
        d, poisson(rate, 60.0, MIX, seed=seed), slots=16, prefill_s=0.05, decode_s=1.0,
        decode_by_tier={"online": 1.0, "batch": 2.0, "offline": 3.0},
        step_per_running_s=0.015, priority=True, report_waiting_every_s=1.0, until=until,
        seed=seed, shape_by_tier=shapes,
    )  # fmt: skip


def online_p99(run: EngineRun) -> float:
    ttfts = run.ttfts("online")
    return ttfts[int(0.99 * (len(ttfts) - 1))]


@pytest.mark.parametrize("seed", [2, 3])
def test_a_mild_overload_keeps_online_fifo_and_served(seed: int) -> None:
    direct = mild_overload(DIRECT, seed)
    bare = mild_overload({"min_share": 0}, seed)
    shipped = mild_overload(None, seed)
    online = sum(1 for r in direct.arrived_at if r.startswith("online"))
    for run in (direct, bare, shipped):
        assert len(run.ttfts("online")) == online  # none shed, none left waiting
    assert online_p99(bare) <= 1.1 * online_p99(direct)
    # The bound's price, counted in engine work: x1.07 and x1.22 (in requests, as before
    # 3 December, an offline release counted as one online one: x1.28 and x1.51).
    assert online_p99(shipped) <= 1.25 * online_p99(direct)


@pytest.mark.parametrize("seed", [1, 3])
def test_a_sustained_overload_keeps_the_engine_busy(seed: int) -> None:
    # 25 req/s, online alone past the engine's capacity: a real overload, so newest first and
    # the feed hold. The awaiting limit, cut while the engine queued, must grow again when it
    # (not the feed) is what keeps online in the gateway. Before, it stayed at 2-3 under a
    # feed of 3-5 and the engine ran 11.9 of its 16 sequences on average (14.1 now). Requests
    # all alike: sized, the starvation bound's releases (which may pass the recovery reserve)
    # are fewer and the reserve's own idle sequences show through (13.55 without this rule,
    # 13.7 with it).
    run = mild_overload(None, seed, rate=25.0, until=60.0, shapes=None)
    assert run.mean_running(10.0, 60.0) > 13.9
