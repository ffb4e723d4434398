"""How long the executor waits for a node to apply a version (a fake clock, no agent): an
apply error ends the wait with the agent's words, a node that stops reporting ends it after
NOT_REPORTING_S rather than at the apply timeout, and cancel ends it at once."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.sweeps.api_helpers import body, make_node, tier_config


class Clock:
    """Each reading is `step` seconds after the previous one."""

    def __init__(self, step: float) -> None:
        self.at = timezone.now()
        self.step = timedelta(seconds=step)

    def __call__(self) -> datetime:
        self.at += self.step
        return self.at


@pytest.fixture
def setup(db: None, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    from console.bench.sweeps import tasks
    from console.bench.sweeps.services import create_sweep
    from console.tuning.services import create_tier_config

    monkeypatch.setattr(tasks, "enqueue", lambda sweep: None)
    setup = make_node()
    setup["sweep"] = create_sweep(body(setup["node"]), None)
    setup["v2"] = create_tier_config(name="tiers", config=tier_config(7), message="v2")
    return setup


def _executor(setup: dict[str, Any], clock: Clock) -> Any:
    from console.bench.sweeps.executor import Executor

    executor = Executor(setup["sweep"].pk, now=clock, poll_s=0)
    assert executor.claim()
    return executor


def test_a_node_that_stops_reporting_ends_the_wait_long_before_the_apply_timeout(
    setup: dict[str, Any],
) -> None:
    from console.bench.sweeps.executor import NOT_REPORTING_S, apply_timeout_s
    from console.fleet.models import Node

    clock = Clock(step=1.0)
    Node.objects.filter(pk=setup["node"].pk).update(last_seen_at=clock.at)
    error = _executor(setup, clock).apply(setup["sweep"], setup["v2"])
    assert error is not None and f"has not reported for over {NOT_REPORTING_S:g} s" in error
    waited = (clock.at - Node.objects.get(pk=setup["node"].pk).last_seen_at).total_seconds()
    assert NOT_REPORTING_S < waited < apply_timeout_s() / 2
    assert Node.objects.get(pk=setup["node"].pk).desired_tier_config_id == setup["v2"].pk


def test_an_apply_error_of_the_version_ends_the_wait_with_the_agents_words(
    setup: dict[str, Any],
) -> None:
    from console.fleet.models import Node

    v2 = setup["v2"]
    Node.objects.filter(pk=setup["node"].pk).update(
        last_seen_at=timezone.now() + timedelta(days=1),  # fresh throughout the fake clock
        apply_errors={"tier_config": {"version": v2.pk, "error": "refused: queue x is bad"}},
    )
    error = _executor(setup, Clock(step=0.5)).apply(setup["sweep"], v2)
    assert error is not None and "refused: queue x is bad" in error


def test_cancel_ends_the_wait_at_once_and_the_restore_is_not_cancellable(
    setup: dict[str, Any],
) -> None:
    from console.bench.sweeps.executor import Cancelled
    from console.bench.sweeps.models import Sweep
    from console.fleet.models import Node

    Node.objects.filter(pk=setup["node"].pk).update(last_seen_at=timezone.now() + timedelta(days=1))
    Sweep.objects.filter(pk=setup["sweep"].pk).update(cancel_requested=True)
    executor = _executor(setup, Clock(step=0.5))
    with pytest.raises(Cancelled):
        executor.apply(setup["sweep"], setup["v2"])
    # The restore waits through a cancel: here the node "applies" the base on the next read.
    Node.objects.filter(pk=setup["node"].pk).update(applied_tier_config=setup["tiers"])
    assert executor.apply(setup["sweep"], setup["tiers"], cancellable=False) is None
