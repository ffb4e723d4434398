"""In Chromium: a finished sweep's page draws both Pareto charts with the locally served
plotly.js (one marker per measured trial, the infeasible ones drawn apart, the front as a
line), and adopting a trial asks first; a running sweep's page asks before cancelling."""

from __future__ import annotations

from typing import Any

import pytest

from console.bench.sweeps.choices import SweepStatus
from console.bench.sweeps.models import Sweep
from console.tuning.rollouts.models import Rollout
from tests.conftest import sign_in
from tests.sweeps.ui_data import finished_sweep, node_with_versions

pytestmark = pytest.mark.browser

# Per trace of a chart: its legend name and the fill colour and shape of each marker.
MARKERS_JS = """(id) => Array.from(
  document.querySelectorAll('#' + id + ' .scatterlayer .trace')).map((trace, i) => ({
    name: document.querySelectorAll('#' + id + ' .legend .traces .legendtext')[i].textContent,
    points: Array.from(trace.querySelectorAll('path.point')).map(
      (p) => ({fill: p.style.fill, d: p.getAttribute('d')})),
    line: (trace.querySelector('path.js-line') || {getAttribute: () => null}).getAttribute('d'),
  }))"""


def test_the_sweep_page_draws_the_pareto_charts_and_adopting_asks_first(
    transactional_db: None, operator: Any, browser_page: Any
) -> None:
    sweep = finished_sweep(node_with_versions())  # 3 feasible trials, 2 infeasible
    page = browser_page
    sign_in(page, "otto")
    # The first page of a fresh server imports plotly and serves its 3 MB script: slow on a
    # loaded machine.
    page.goto(f"/benchmarks/sweeps/{sweep.pk}/", timeout=90_000)
    for chart in ("chart-pareto-latency", "chart-pareto-tokens"):
        page.wait_for_selector(f"#{chart}.js-plotly-plot .scatterlayer path.point")
        traces = {t["name"]: t for t in page.evaluate(MARKERS_JS, chart)}
        assert set(traces) == {"feasible", "infeasible", "Pareto front (feasible)"}
        feasible, infeasible = traces["feasible"]["points"], traces["infeasible"]["points"]
        assert len(feasible) == 3 and len(infeasible) == 2
        assert not traces["Pareto front (feasible)"]["points"]  # a line, no markers
        assert traces["Pareto front (feasible)"]["line"]
        # Infeasible trials differ in colour and in shape from every feasible one.
        assert {p["fill"] for p in feasible}.isdisjoint({p["fill"] for p in infeasible})
        shapes = {p["d"] for p in feasible}
        assert all(p["d"] not in shapes for p in infeasible)
    assert "better" in page.inner_text("#best-verdict") or "no clear change" in page.inner_text(
        "#best-verdict"
    )

    # Adopt asks first; dismissed, nothing happens.
    asked: list[str] = []

    def dismiss(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.click("#adopt-1")
    page.wait_for_timeout(300)
    assert asked and asked[0].startswith("Adopt trial 1 (")
    assert "rolls it out to sweep-node with the SLO guard on" in asked[0]
    assert page.url.endswith(f"/benchmarks/sweeps/{sweep.pk}/")
    assert not Rollout.objects.exists()
    # Accepted, the service decides (here it refuses: the node's agent was never seen).
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#adopt-1")
    page.wait_for_selector(".messages li.error")
    assert "never seen" in page.inner_text(".messages")
    assert not Rollout.objects.exists()


def test_cancelling_a_running_sweep_asks_first(
    transactional_db: None, operator: Any, browser_page: Any
) -> None:
    sweep = finished_sweep(node_with_versions(), status=SweepStatus.RUNNING, with_runs=False)
    page = browser_page
    sign_in(page, "otto")
    page.goto(f"/benchmarks/sweeps/{sweep.pk}/", timeout=90_000)
    assert "ETA about 4 min 10 s" in page.inner_text("#sweep-progress")
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click("#cancel-sweep button")
    page.wait_for_timeout(300)
    assert not Sweep.objects.get(pk=sweep.pk).cancel_requested
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel-sweep button")
    page.wait_for_selector("text=Cancel requested")
    assert Sweep.objects.get(pk=sweep.pk).cancel_requested


def test_the_form_shows_only_nodes_with_a_version_of_the_chosen_kind(
    transactional_db: None, operator: Any, browser_page: Any
) -> None:
    both = node_with_versions("node-both")
    tiers_only = node_with_versions("node-tiers", profile=False)
    page = browser_page
    sign_in(page, "otto")
    page.goto(f"/benchmarks/sweeps/new/?node={both.pk}", timeout=90_000)
    hidden = "(v) => document.querySelector('select[name=node] option[value=\"' + v + '\"]').hidden"
    assert page.evaluate(hidden, str(tiers_only.pk)) is False
    assert page.get_attribute("input[name=var1_path]", "list") == f"sweep-paths-tc-{both.pk}"
    assert both.desired_tier_config.label in page.inner_text("#base-version")
    page.check("input[name=kind][value=launch_profile]")
    assert page.evaluate(hidden, str(tiers_only.pk)) is True
    assert page.get_attribute("input[name=var1_path]", "list") == "sweep-paths-lp"
    assert both.desired_launch_profile.label in page.inner_text("#base-version")
    # A preset hides the custom workload's fields; "custom" shows them.
    assert not page.is_visible("input[name=prompt_tokens]")
    page.select_option("select[name=preset]", "")
    assert page.is_visible("input[name=prompt_tokens]")


def test_the_running_sweeps_page_follows_its_progress(
    transactional_db: None, viewer: Any, browser_page: Any
) -> None:
    sweep = finished_sweep(node_with_versions(), status=SweepStatus.RUNNING, with_runs=False)
    page = browser_page
    sign_in(page, "vera")
    page.goto(f"/benchmarks/sweeps/{sweep.pk}/", timeout=90_000)
    page.evaluate("window.__notReloaded = true")
    # The ETA moves: the fragment changes in place.
    Sweep.objects.filter(pk=sweep.pk).update(eta_s=65.0)
    page.wait_for_function(
        "document.querySelector('#sweep-progress').innerText.includes('ETA about 1 min 5 s')"
    )
    assert page.evaluate("window.__notReloaded") is True
    # A trial finished: the page reloads once to redraw the charts with it.
    Sweep.objects.filter(pk=sweep.pk).update(trials_done=3)
    page.wait_for_function("window.__notReloaded === undefined", timeout=30_000)
    page.wait_for_selector("#sweep-progress-text")
    assert "3 / 5 trials" in page.inner_text("#sweep-progress-text")
