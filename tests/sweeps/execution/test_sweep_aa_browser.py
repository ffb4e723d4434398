"""An A/A sweep crowns nothing (issue 56): a one-variable sweep whose value equals the base's,
run by the real Celery worker through a real agent, three runs a trial by default, ends with
"no trial beats the base"; in Chromium its page says so, marks no trial "best", and the Adopt
button's confirmation says the trial is not decided better than the base."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import sign_in
from tests.sweeps.execution.sweep_helpers import (
    WORKLOAD,
    describe,
    make_sweep,
    tier_config,
    wait_finished,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]
PATH = "scheduler.queues.online.max_waiting_time_ms"


def test_an_a_a_sweep_crowns_nothing(
    celery_worker_proc: Any, swept_node: Any, operator: Any, browser_page: Any
) -> None:
    from console.bench.sweeps.choices import Objective, SweepKind

    swept = swept_node(tier_config())  # the online queue waits 1 ms
    sweep = make_sweep(
        swept,
        kind=SweepKind.TIER_CONFIG,
        variables=[{"path": PATH, "values": [1]}],  # the base's own value: an A/A trial
        objective=Objective.MIN_ONLINE_TTFT_P99,
        repeats=3,
        workload={**WORKLOAD, "duration_s": 1.5},
    )
    sweep = wait_finished(sweep, timeout=240)
    info = describe(sweep)
    assert sweep.status == "succeeded", info
    trial = sweep.trials.get(index=1)
    assert trial.status == "succeeded" and trial.feasible, info
    assert trial.decision["outcome"] != "better", (trial.decision, info)
    assert sweep.best_trial is not None and sweep.best_trial.is_base, info
    assert sweep.status_reason.endswith("no trial beats the base"), info

    page = browser_page
    sign_in(page, "otto")
    page.goto(f"/benchmarks/sweeps/{sweep.pk}/", timeout=90_000)
    assert page.inner_text("#sweep-result").startswith("No trial beats the base")
    assert page.locator("#trials .badge.ok", has_text="best").count() == 0
    assert "No trial beats the base" in page.inner_text("#best-verdict")
    cell = page.inner_text('#trials tr[data-trial="1"] td.decision')
    assert cell and not cell.startswith("better"), cell
    asked: list[str] = []

    def dismiss(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.click("#adopt-1")
    page.wait_for_timeout(300)
    assert asked and "It is NOT decided better than the base" in asked[0], asked
