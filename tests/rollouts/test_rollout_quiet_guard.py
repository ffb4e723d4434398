"""A guard that judges or says it could not (issue 56), on real agents and the simulator with no
client traffic at all: the canary is probed through its gateway and judged on those requests
(never "passed" on none), or, as the rollout is told, it pauses and asks; the operator resumes
(the wave goes on, counted unguarded) or aborts (rolled back). The list and the pages say
"guarded by N requests" or "unguarded"."""

from __future__ import annotations

import re
from typing import Any

import httpx

from tests.rollouts.rollout_helpers import ExecutorThread, run_rollout, stream_completion, timeline
from tests.waiting import wait_for

SHORT = {"canary_soak_s": 1.0, "guard_window_s": 1.0, "convergence_timeout_s": 15}


def console_key_works(node: Any, agent: Any) -> str:
    """Wait until the node's gateway takes the console's own key (the probe's); return it."""
    from console.tuning.rollouts.probe import target_of

    def works() -> str:
        found = target_of(node)
        if isinstance(found, str):
            return ""
        with httpx.Client(timeout=10) as client:
            return (
                found.api_key
                if stream_completion(client, agent.url, found.api_key, 1)[0] == 200
                else ""
            )

    key: str = wait_for(works, timeout=20, poll=0.2, what=f"{node.name}'s console key")
    return key


def guarded(message: str) -> int:
    found = re.search(r"guarded by (\d+) probe requests", message)
    assert found, message
    return int(found.group(1))


def test_a_quiet_canary_is_probed_and_judged_on_those_requests(
    fleet: Any, versions: Any, client: Any, operator: Any
) -> None:
    from console.tuning.rollouts import services

    _, v2 = versions
    nodes = fleet(2)
    for node, agent in nodes:
        console_key_works(node, agent)
    rollout = run_rollout(
        # The default guard (TTFT P99 +50 %, errors 5 %) and the default "probe when quiet".
        services.create_rollout(
            tier_config=v2, canary_count=1, guard_probe_s=4.0, start=False, **SHORT
        ),
        timeout=90,
    )
    text = timeline(rollout)
    assert rollout.state == "succeeded", text
    assert rollout.guard_when_quiet == "probe"
    lines = {e.message for e in rollout.events.all()}
    # The canary against the second node, still on v1, probed beside it...
    first = next(m for m in lines if m.startswith("wave 1: SLO guard passed"))
    assert "probe of gpu-01 for 4 s against gpu-02 (old versions, probed beside it)" in first
    assert "its own traffic was too thin" in first
    # ...and the last wave, with no node left on v1, against its own probe before the change.
    assert any(m.startswith("wave 2: probed before the change") for m in lines), text
    second = next(m for m in lines if m.startswith("wave 2: SLO guard passed"))
    assert "against the same probe on gpu-02 before the change" in second
    total = guarded(first) + guarded(second)
    assert total >= 2 * 5  # at least MIN_REQUESTS a wave, or the guard would not have passed
    assert rollout.guarded_requests == total
    assert rollout.guard_coverage == f"guarded by {total} requests"
    assert rollout.reason.endswith(f"guarded by {total} requests")
    # Never a pass on too few: every verdict names the requests it rests on.
    passes = [m for m in lines if "SLO guard passed" in m]
    assert len(passes) == 2 and all(guarded(m) >= 5 for m in passes)
    assert "could not judge" not in text and "paused" not in text
    for _, agent in nodes:
        assert agent.applied() == v2.pk
    client.force_login(operator)
    row = re.search(
        rf'<tr data-rollout="{rollout.pk}">.*?</tr>', _page(client, "/tuning/rollouts/"), re.S
    )
    assert row and f"guarded by {total} requests" in row.group(0)
    live = _page(client, f"/tuning/rollouts/{rollout.pk}/live/")
    assert f'<p id="rollout-guard">SLO guard: guarded by {total} requests</p>' in live


def test_a_quiet_canary_set_to_pause_waits_then_resumes_unguarded_or_aborts(
    fleet: Any, versions: Any, api: Any, operator: Any
) -> None:
    from console.tuning.rollouts import services
    from console.tuning.rollouts.models import Rollout
    from console.tuning.rollouts.tasks import orphaned_rollouts

    v1, v2 = versions
    ((_, agent),) = fleet(1)

    def paused() -> Any:
        rollout = services.create_rollout(
            tier_config=v2, canary_count=1, guard_when_quiet="pause", start=False, **SHORT
        )
        assert run_thread(rollout.pk) == "paused"
        rollout.refresh_from_db()
        assert rollout.state == "paused" and rollout.guard_coverage == "not judged yet"
        assert "SLO guard could not judge" in rollout.reason
        assert "this rollout pauses rather than probes" in rollout.reason
        assert "Resume to let the wave go on unguarded, or abort" in rollout.reason
        assert "SLO guard passed" not in timeline(rollout)
        assert rollout.pk not in orphaned_rollouts()  # no worker picks it up on its own
        return rollout

    # Abort: a worker rolls it back.
    first = paused()
    assert agent.applied() == v2.pk
    response = api(operator).post(f"/api/v1/rollouts/{first.pk}/abort/")
    assert response.status_code == 200, response.json()
    # Now there is something to do: the beat's sweep no longer leaves it to the operator (a
    # Celery worker the session started earlier may already hold it, from the abort's enqueue).
    assert first.pk in orphaned_rollouts() or Rollout.objects.get(pk=first.pk).lease_until
    assert run_to_end(first.pk) == "aborted"
    wait_for(lambda: agent.applied() == v1.pk, what="the canary back on v1")
    first.refresh_from_db()
    assert first.guard_coverage == "unguarded (no wave was judged)"

    # Resume: the wave goes on without a verdict, and the rollout says it was unguarded.
    second = paused()
    response = api(operator).post(f"/api/v1/rollouts/{second.pk}/resume/")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["state"] == "running" and body["unguarded_waves"] == 1
    assert run_to_end(second.pk) == "succeeded"
    second.refresh_from_db()
    assert second.guard_coverage == "unguarded (1 wave(s) unguarded)"
    assert second.reason.endswith("unguarded (1 wave(s) unguarded)")
    assert "resumed by otto: wave 1 goes on without a guard verdict" in timeline(second)
    assert agent.applied() == v2.pk
    # Resuming what is not paused says so.
    again = api(operator).post(f"/api/v1/rollouts/{second.pk}/resume/")
    assert again.status_code == 400 and "not paused" in str(again.json()["state"])


def test_a_probe_the_gateway_refuses_pauses_rather_than_judges(fleet: Any, versions: Any) -> None:
    from console.fleet.gateway_keys import node_key_name, revoke_gateway_key
    from console.fleet.models import GatewayKey
    from console.tuning.rollouts import services

    _, v2 = versions
    ((node, agent),) = fleet(1)
    key = console_key_works(node, agent)
    revoke_gateway_key(GatewayKey.objects.active().get(name=node_key_name(node)), None)
    with httpx.Client(timeout=10) as client:
        wait_for(
            lambda: stream_completion(client, agent.url, key, 1)[0] == 401,
            timeout=20,
            poll=0.2,
            what="the agent to drop the revoked key",
        )
    rollout = services.create_rollout(
        tier_config=v2,
        canary_count=1,
        guard_max_ttft_p99_regression_pct=None,  # the error rate alone: no probe before
        guard_probe_s=2.0,
        start=False,
        **SHORT,
    )
    assert run_thread(rollout.pk) == "paused"
    rollout.refresh_from_db()
    assert "the probe failed: gpu-01's gateway refused the console's key" in rollout.reason
    assert rollout.guarded_requests == 0 and rollout.guard_coverage == "not judged yet"


def run_to_end(rollout_id: int, timeout: float = 60.0) -> str:
    """The state a resumed or aborted rollout ends in: run here, as a worker would, unless a
    worker (the session's, where an earlier test started one) took it first from the queue."""
    from console.tuning.rollouts.choices import FINAL_STATES
    from console.tuning.rollouts.models import Rollout

    state = run_thread(rollout_id, timeout)
    if state:
        return state
    wait_for(
        lambda: Rollout.objects.get(pk=rollout_id).state in FINAL_STATES,
        timeout=timeout,
        what=f"rollout {rollout_id} to end",
    )
    return str(Rollout.objects.get(pk=rollout_id).state)


def run_thread(rollout_id: int, timeout: float = 60.0) -> str:
    """Execute the rollout in a thread, as a worker would, until it ends or pauses."""
    thread = ExecutorThread(rollout_id)
    thread.start()
    return thread.finish(timeout)


def _page(client: Any, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200
    return str(response.content.decode())
