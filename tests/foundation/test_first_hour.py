"""A new operator's first hour, in Chromium, on what `make demo` sets up (issue 58): the demo's
own seeding (`manage.py demo --no-processes`: the admin, the two nodes, "default" v1 and v2,
each node's launch profile), its two managed agents each supervising a simulated engine from
its profile, and a real Celery worker. Then, as an operator would: sign in, the playground on
both demo endpoints, a benchmark on each, a repeat pair and its comparison, a one-variable
sweep, adopting its best trial, the guarded rollout that follows, rolling it back, and the
audit trail of it all. Every step is what the pages offer; nothing is set up by hand between
them except where said (the rollout's 60 s canary soak is shortened)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_agent.sim.testing import free_port
from tests.conftest import sign_in
from tests.rollouts.rollout_helpers import Agent, spawn_agent
from tests.waiting import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WAIT = "scheduler.queues.online.max_waiting_time_ms"


class Demo:
    def __init__(self, data_dir: Path, password: str, agents: dict[str, Agent]) -> None:
        self.data_dir, self.password, self.agents = data_dir, password, agents


@pytest.fixture
def demo(
    transactional_db: None,
    celery_worker_proc: Any,
    live_server: Any,
    settings: Any,
    tmp_path: Path,
) -> Iterator[Demo]:
    """`make demo`'s setup, its agents pointed at the live test console."""
    from django.core.management import call_command

    from console.core.demo import DEMO_ENGINES_FILE
    from console.fleet.demo import DEMO_FILE
    from console.fleet.models import Node

    settings.DATA_DIR = tmp_path
    settings.TIERGATE_HEARTBEAT_INTERVAL_S = 0.3  # the live server is this process
    with open(tmp_path / "demo.out", "w") as out:
        call_command("demo", "--no-processes", stdout=out)
    password = (tmp_path / "demo-admin.txt").read_text().strip()
    nodes = json.loads((tmp_path / DEMO_FILE).read_text())
    engines = json.loads((tmp_path / DEMO_ENGINES_FILE).read_text())
    agents: dict[str, Agent] = {}
    try:
        for node in nodes:
            # As the demo launcher starts it (console/core/demo.py), on ports free here.
            cmd = shlex.join([*engines[node["name"]], "--port", str(free_port())])
            agents[node["name"]] = spawn_agent(
                node["name"], node["token"], live_server.url, tmp_path, engine_cmd=cmd
            )
        for agent in agents.values():
            agent.wait_ready(60)
        wait_for(
            lambda: (
                Node.objects.filter(name__in=list(agents)).exclude(applied_tier_config=None).count()
                == 2
                and all(n.status() == "healthy" for n in Node.objects.all())
            ),
            timeout=90,
            what="both demo nodes to apply their versions and be healthy",
        )
        yield Demo(tmp_path, password, agents)
    finally:
        for agent in agents.values():
            agent.stop()


def _accept_dialogs(page: Any) -> list[str]:
    seen: list[str] = []

    def accept(dialog: Any) -> None:
        seen.append(dialog.message)
        dialog.accept()

    page.on("dialog", accept)
    return seen


def _finished_runs(count: int, timeout: float = 120) -> list[Any]:
    from console.bench.choices import FINISHED
    from console.bench.models import BenchmarkRun

    def done() -> list[Any] | None:
        runs = list(BenchmarkRun.objects.order_by("pk"))
        if len(runs) >= count and all(r.status in FINISHED for r in runs):
            return runs
        return None

    return wait_for(done, timeout=timeout, what=f"{count} benchmark runs to finish", poll=0.5)


def test_a_new_operators_first_hour(demo: Demo, browser_page: Any) -> None:
    from django.db import connections

    try:
        _first_hour(demo, browser_page)
    finally:
        # Playwright's sync API gave this body's ORM calls a connection of their own.
        connections.close_all()


def _first_hour(demo: Demo, page: Any) -> None:
    from console.audit.models import AuditEvent
    from console.bench.models import BenchmarkRun
    from console.bench.sweeps.models import Sweep
    from console.fleet.models import Endpoint, Node
    from console.tuning.models import TierConfigVersion
    from console.tuning.rollouts.models import Rollout

    dialogs = _accept_dialogs(page)
    node1 = Node.objects.get(name="demo-node-1")
    v1 = TierConfigVersion.objects.get(name="default", version=1)
    assert node1.desired_tier_config_id == v1.pk

    # -- sign in as the demo prints it ---------------------------------------------------
    sign_in(page, "admin", demo.password)

    # -- the playground, both demo endpoints, no "Fetch models" ----------------------------
    gateways = wait_for(
        lambda: (
            list(Endpoint.objects.filter(kind="gateway", models=["demo-8b"]).order_by("name"))
            if Endpoint.objects.filter(kind="gateway", models=["demo-8b"]).count() == 2
            else None
        ),
        timeout=30,
        what="both gateway endpoints to know the engine's model",
    )
    assert [e.name for e in gateways] == ["demo-node-1-gateway", "demo-node-2-gateway"]
    page.click("nav.mainnav >> text=Playground")
    assert page.eval_on_selector("#id_endpoint_a", "s => s.selectedOptions[0].text") == (
        "demo-node-1-gateway"
    )
    assert page.eval_on_selector("#id_endpoint_b", "s => s.selectedOptions[0].text") == (
        "demo-node-2-gateway"
    )
    assert page.eval_on_selector_all("#models-a option", "os => os.map(o => o.value)") == [
        "demo-8b"
    ]
    page.fill("#id_conversation", "Say hello to a new operator")
    page.fill("#id_max_tokens", "12")
    page.click("text=Send to both")
    for side in ("a", "b"):
        page.wait_for_selector(f"#side-{side}[data-finished=done]", timeout=60_000)
        assert page.locator(f"#side-{side} [data-field=tier]").inner_text() == "online"
        assert page.locator(f"#side-{side} [data-field=text]").inner_text().strip()

    # -- a benchmark on each node (one click each) -----------------------------------------
    page.click("nav.mainnav >> text=Benchmarks")
    for gateway in gateways:
        page.click(f"button[data-preset=smoke][data-endpoint='{gateway.name}']")
        page.wait_for_url("**/benchmarks/*/")
        page.goto("/benchmarks/")
    first, second = _finished_runs(2)
    assert first.status == second.status == "succeeded", (first.status_reason, second.status_reason)

    # -- compare them, then repeat the pair interleaved ------------------------------------
    page.goto("/benchmarks/")
    page.check(f"#runs input[name=a][value='{first.pk}']")
    page.check(f"#runs input[name=b][value='{second.pk}']")
    page.click("text=Compare A with B")
    page.wait_for_selector("#decision")
    page.fill("#repeat-pair input[name=repeats]", "2")
    page.click("#repeat-pair button")
    runs = _finished_runs(6, timeout=240)
    assert all(r.status == "succeeded" for r in runs), [(r.pk, r.status_reason) for r in runs]
    pair = [r for r in runs if r.series_id is not None]
    assert len(pair) == 4 and len({r.series_id for r in pair}) == 2
    page.wait_for_selector("#decision", timeout=30_000)
    page.reload()
    assert page.locator("#decision").inner_text().strip()
    sides = page.inner_text("#sides")
    assert "A: " in sides and "B: " in sides

    # -- a one-variable sweep of node 1's online batching window ---------------------------
    page.goto(f"/benchmarks/sweeps/new/?node={node1.pk}")
    page.check("input[name=kind][value=tier_config]")
    page.fill("input[name=var1_path]", WAIT)
    page.fill("input[name=var1_values]", "2, 20")
    page.select_option("select[name=preset]", "smoke")
    page.fill("input[name=repeats]", "1")
    page.fill("input[name=max_ttft_p99_ms]", "")
    page.select_option("select[name=objective]", "max_throughput")
    page.click("#sweep-form button.primary")
    page.wait_for_url("**/benchmarks/sweeps/*/")
    sweep = Sweep.objects.get()
    sweep = wait_for(
        lambda: Sweep.objects.filter(pk=sweep.pk, status__in=["succeeded", "failed"]).first(),
        timeout=300,
        what="the sweep to finish",
        poll=0.5,
    )
    assert sweep.status == "succeeded", sweep.status_reason
    node1.refresh_from_db()
    assert node1.desired_tier_config_id == v1.pk  # back on its base
    page.reload()
    # Which value wins a 20-request smoke run is noise here; the operator adopts the better of
    # the two values (the base may have won: adopting a trial is the operator's call).
    trials = [t for t in sweep.trials.order_by("objective_value") if not t.is_base]
    assert len(trials) == 2 and all(t.status == "succeeded" and t.feasible for t in trials)
    best = trials[0]
    labels = page.inner_text("#trials")
    assert f"default-sweep{sweep.pk}-trial" in labels  # trial versions named for the sweep

    # -- adopt the best trial: a new version of "default" and a guarded rollout -------------
    page.click(f"#adopt-{best.index}")
    page.wait_for_url("**/tuning/rollouts/*/")
    assert dialogs and dialogs[-1].startswith(f"Adopt trial {best.index} (")
    rollout = Rollout.objects.get()
    assert rollout.has_guard
    # The operator's 60 s canary soak and 10 s probe of a quiet canary, shortened for the test
    # (the guard stays on).
    Rollout.objects.filter(pk=rollout.pk).update(
        canary_soak_s=3.0, guard_window_s=3.0, guard_probe_s=3.0
    )
    page.wait_for_selector('#rollout-status[data-state="succeeded"]', timeout=180_000)
    adopted = TierConfigVersion.objects.get(name="default", version=3)
    assert adopted.parent_id == v1.pk  # made from the sweep's base
    node1.refresh_from_db()
    assert node1.applied_tier_config_id == adopted.pk
    captions = page.inner_text("#diff-1 caption")
    assert "on demo-node-1: from default v1 to default v3" in captions

    # -- roll it back --------------------------------------------------------------------------
    page.click("#roll-back")
    page.wait_for_url(lambda url: f"/tuning/rollouts/{rollout.pk}/" not in url)
    page.wait_for_selector('#rollout-status[data-state="succeeded"]', timeout=120_000)
    assert "Rollback #" in page.inner_text("h1")
    wait_for(
        lambda: Node.objects.get(pk=node1.pk).applied_tier_config_id == v1.pk,
        what="demo-node-1 to run default v1 again",
    )

    # -- the audit trail: who did what, from the operator's clicks --------------------------
    page.goto("/audit/")
    trail = page.inner_text("main")
    for thing in ("playground", "benchmark", "sweep", "tier config version", "rollout"):
        assert thing in trail.lower(), thing
    mine = AuditEvent.objects.filter(actor_name="admin")
    assert mine.filter(object_type="playground.comparison").exists()
    assert mine.filter(object_type="bench.benchmarkrun").count() >= 2
    assert mine.filter(object_type="tuning.rollout").count() >= 2  # the rollout and its rollback
    assert BenchmarkRun.objects.filter(created_by__username="admin").count() >= 6
