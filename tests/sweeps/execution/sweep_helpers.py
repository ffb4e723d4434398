"""Helpers of the sweep execution tests: make a sweep on a swept node, wait for its end, and
read its trials."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.agent.agent_helpers import queue
from tests.rollouts.rollout_helpers import Agent
from tests.waiting import wait_for

MODEL = "demo"
STEP_S = 0.02
SIM_FLAGS = ("--sim-preset=tiny-test", f"--sim-base-step-s={STEP_S}")
# 16 closed-loop clients, 8 output tokens each, all online: a few hundred requests in 2 s.
WORKLOAD: dict[str, Any] = {
    "concurrency": 16,
    "duration_s": 2,
    "prompt_tokens": 32,
    "max_tokens": 8,
    "tier_mix": {"online": 1.0},
}


def tier_config(max_in_flight: int | None = None, **online: Any) -> dict[str, Any]:
    scheduler: dict[str, Any] = {
        "queues": {"online": queue(1, **online), "batch": queue(2), "offline": queue(3)}
    }
    if max_in_flight is not None:
        scheduler["admission"] = {"max_in_flight": max_in_flight}
    return {"scheduler": scheduler}


@dataclass
class SweptNode:
    node: Any
    agent: Agent
    endpoint: Any
    tier_config: Any
    launch_profile: Any = None

    def reload(self) -> Any:
        self.node.refresh_from_db()
        return self.node


def make_sweep(
    swept: SweptNode,
    *,
    kind: str,
    variables: list[dict[str, Any]],
    objective: str,
    constraints: dict[str, Any] | None = None,
    repeats: int = 1,
    workload: dict[str, Any] | None = None,
) -> Any:
    """A sweep of the node as an operator creates it: services.create_sweep, which queues it
    for the Celery worker once committed."""
    from console.bench.sweeps.services import create_sweep

    return create_sweep(
        {
            "name": f"test {kind}",
            "node": swept.node.pk,
            "kind": kind,
            # Named: the gateway endpoint's model list arrives with a later heartbeat, which a
            # loaded machine may not have sent yet.
            "model": MODEL,
            "variables": variables,
            "workload": workload or WORKLOAD,
            "repeats": repeats,
            "constraints": constraints or {},
            "objective": objective,
        },
        None,
    )


def wait_finished(sweep: Any, timeout: float = 120.0) -> Any:
    from console.bench.sweeps.models import Sweep

    wait_for(
        lambda: Sweep.objects.get(pk=sweep.pk).is_finished,
        timeout=timeout,
        poll=0.2,
        what=f"{sweep} to finish",
    )
    sweep.refresh_from_db()
    return sweep


def trials_of(sweep: Any) -> list[Any]:
    return list(sweep.trials.order_by("index"))


def by_value(sweep: Any, path: str) -> dict[Any, Any]:
    """The measured trials by the value of `path` ("base" for the base)."""
    return {t.values.get(path, "base"): t for t in trials_of(sweep)}


def describe(sweep: Any) -> str:
    """What to print when an assertion fails: each trial's status, figures and errors."""
    lines = [f"{sweep}: {sweep.status} ({sweep.status_reason}) restored={sweep.restored}"]
    for t in trials_of(sweep):
        m = t.metrics or {}
        lines.append(
            f"  {t.index} {t.values_label}: {t.status} rps={m.get('throughput_rps')} "
            f"ttft_p99={m.get('ttft_p99_ms')} err={m.get('error_rate')} "
            f"feasible={t.feasible} {t.violations} apply={t.apply_s} bench={t.bench_s} "
            f"{t.error}"
        )
    return "\n".join(lines)
