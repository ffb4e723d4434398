"""Rollouts under traffic sent through the agents' gateways: an SLO regression rolls back on
its own, and requests in flight during a hot reconfigure all complete."""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any

import httpx

from tests.rollouts.rollout_helpers import (
    QUICK,
    Load,
    run_rollout,
    stream_completion,
    tier_config,
    timeline,
)
from tests.waiting import wait_for


def _key() -> str:
    from console.fleet.gateway_keys import create_gateway_key

    _, plaintext = create_gateway_key(
        "load", ["online", "batch", "offline"], "online", None, check=False
    )
    return plaintext


def _wait_key(agent: Any, key: str) -> None:
    with httpx.Client(timeout=10) as client:
        wait_for(
            lambda: stream_completion(client, agent.url, key, 1)[0] == 200,
            timeout=10,
            poll=0.1,
            what="the agent to receive the gateway key",
        )


def test_a_config_that_starves_online_traffic_is_rolled_back_by_the_slo_guard(
    fleet: Any, versions: Any
) -> None:
    from console.tuning.rollouts import services
    from console.tuning.services import create_tier_config

    v1, _ = versions
    key = _key()
    nodes = fleet(2)
    for _, agent in nodes:
        _wait_key(agent, key)
    # One request at the engine at a time: under six 64-token streams per node every request queues
    # in the gateway, and online TTFT P99 grows several-fold. (A long batching window no longer
    # starves anyone: release is work-conserving, a window only orders a saturated engine.)
    config = tier_config()
    config["scheduler"]["admission"] = {"max_in_flight": 1}
    starving = create_tier_config(name="tiers", config=config, message="starves online")
    with Load([agent.url for _, agent in nodes], key, workers_per_url=6, max_tokens=64) as load:
        time.sleep(2.0)  # the baseline: the window before the change
        # The default guard (TTFT P99 +50 %, errors 5 %): no guard argument is given.
        rollout = services.create_rollout(
            tier_config=starving,
            canary_count=1,
            convergence_timeout_s=15,
            guard_window_s=2.0,
            canary_soak_s=2.0,
            start=False,
        )
        assert (rollout.guard_max_ttft_p99_regression_pct, rollout.guard_max_error_rate) == (
            services.DEFAULT_GUARD_TTFT_P99_REGRESSION_PCT,
            services.DEFAULT_GUARD_ERROR_RATE,
        )
        rollout = run_rollout(rollout)
    assert not load.failed, load.failed[:3]
    assert rollout.state == "rolled_back", timeline(rollout)
    assert "SLO guard failed" in rollout.reason and "online TTFT P99" in rollout.reason
    canary, second = (p for p in rollout.nodes.order_by("position"))
    # The guard trips on the canary's window, or (on a machine too busy for a 2 s window to
    # show the regression) on the next wave's: either way every node it touched is rolled back.
    assert canary.state == "rolled_back" and second.state in {"pending", "rolled_back"}
    for _, agent in nodes:
        assert agent.applied() == v1.pk


def test_requests_in_flight_survive_a_hot_reconfigure(fleet: Any, versions: Any) -> None:
    from console.tuning.rollouts import services

    _, v2 = versions
    key = _key()
    ((_, agent),) = fleet(1)
    _wait_key(agent, key)
    with httpx.Client(timeout=30) as client, concurrent.futures.ThreadPoolExecutor(8) as pool:
        # Long streams (about 1.5-2 s each) that straddle the reconfigure.
        def timed() -> tuple[int, str, float]:
            status, text = stream_completion(client, agent.url, key, 1000)
            return status, text, time.time()

        futures = [pool.submit(timed) for _ in range(8)]
        time.sleep(0.1)  # the streams are under way
        rollout = run_rollout(
            services.create_rollout(
                tier_config=v2, canary_count=0, convergence_timeout_s=10, start=False, **QUICK
            )
        )
        assert rollout.state == "succeeded", timeline(rollout)
        results = [f.result(timeout=30) for f in futures]
    assert agent.applied() == v2.pk
    # The config changed under them: every stream ended after the node reported v2 applied.
    applied_at = rollout.nodes.get().applied_at.timestamp()
    assert min(end for _, _, end in results) > applied_at
    for status, text, _ in results:
        assert status == 200, text[:300]
        assert text.rstrip().endswith("data: [DONE]")
        assert '"completion_tokens":1000' in text.replace(" ", "")
