"""Setup shared by the sweep API tests (no agent: the node is made to look seen and healthy,
and finished trials are written directly, as the executor would leave them)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

WAIT = "scheduler.queues.online.max_waiting_time_ms"
WORKLOAD = {"concurrency": 2, "requests": 10, "prompt_tokens": 16, "max_tokens": 8}
PROFILES = {
    "online": {"weight": 0.7, "prompt_tokens": 16, "max_tokens": 8},
    "batch": {"weight": 0.3, "prompt_tokens": 32, "max_tokens": 8},
}


def tier_config(online_wait_ms: float = 10) -> dict[str, Any]:
    def queue(priority: int, wait: float) -> dict[str, Any]:
        return {
            "max_batch_size": 8,
            "max_waiting_time_ms": wait,
            "max_tokens_per_batch": 4096,
            "priority": priority,
        }

    return {
        "scheduler": {
            "queues": {"online": queue(1, online_wait_ms), "batch": queue(2, 50)},
        }
    }


def launch_args(max_num_seqs: int = 32) -> dict[str, Any]:
    return {
        "model": "sim-model",
        "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": 8192,
        "max_model_len": 4096,
    }


def make_node(name: str = "gpu-a", *, profile: bool = False) -> dict[str, Any]:
    """A node desiring tier config "tiers" v1 (and launch profile "engine" v1), seen and
    healthy, with its gateway endpoint."""
    from console.fleet.choices import EndpointKind, NodeMode
    from console.fleet.models import Node
    from console.fleet.services import create_endpoint, create_node, set_desired
    from console.tuning.services import create_launch_profile, create_tier_config

    tiers = create_tier_config(name="tiers", config=tier_config(), message="v1")
    engine = (
        create_launch_profile(name="engine", args=launch_args(), message="v1") if profile else None
    )
    node, _ = create_node(name, ["test"], None)
    set_desired([node], tier_config=tiers, launch_profile=engine)
    Node.objects.filter(pk=node.pk).update(
        last_seen_at=timezone.now(),
        health={"gateway": "ok", "engine": "ok", "detail": ""},
        mode=NodeMode.MANAGED,
        applied_tier_config=tiers,
        applied_launch_profile=engine,
    )
    node.refresh_from_db()
    endpoint = create_endpoint(
        None,
        name=f"{name}-gateway",
        base_url="http://127.0.0.1:9/v1",
        kind=EndpointKind.GATEWAY,
        node=node,
        default_model="sim-model",
    )
    return {"node": node, "endpoint": endpoint, "tiers": tiers, "engine": engine}


def body(node: Any, /, **overrides: Any) -> dict[str, Any]:
    """A valid tier-config sweep of the online wait, with a custom two-tier workload."""
    return {
        "name": "online wait",
        "node": node.pk,
        "kind": "tier_config",
        "variables": [{"path": WAIT, "values": [1, 5, 20]}],
        "workload": WORKLOAD,
        "tier_profiles": PROFILES,
        "repeats": 2,
        "constraints": {"max_ttft_p99_ms": {"online": 500}, "max_error_rate": 0.01},
        **overrides,
    }


def finish(sweep: Any, trials: list[dict[str, Any]], *, status: str = "succeeded") -> None:
    """Write trials as the executor would leave them, and end the sweep (node restored)."""
    from console.bench.sweeps.models import Sweep, SweepTrial
    from console.bench.sweeps.spec import apply_values

    base = sweep.trials.get(index=0)
    base.status, base.feasible, base.objective_value = "succeeded", True, 100.0
    base.save()
    for index, spec in enumerate(trials, start=1):
        SweepTrial.objects.create(
            sweep=sweep,
            index=index,
            values=spec["values"],
            document=apply_values(sweep.kind, base.document, spec["values"]),
            status=spec.get("status", "succeeded"),
            feasible=spec.get("feasible", True),
            violations=spec.get("violations", []),
            objective_value=spec.get("objective_value", 50.0),
            metrics={"ttft_p99_ms": {"online": spec.get("objective_value", 50.0)}},
            # Decided better than the base unless the test says otherwise (an undecided trial
            # is adopted only with confirm_undecided).
            decision=spec.get("decision", {"outcome": "better", "headline": "better"}),
        )
    Sweep.objects.filter(pk=sweep.pk).update(
        status=status, restored=True, finished_at=timezone.now(), trials_done=len(trials) + 1
    )
    sweep.refresh_from_db()
    seen(sweep.node)


def seen(node: Any) -> None:
    """As if its agent had just beaten (a rollout refuses a stale node)."""
    from console.fleet.models import Node

    Node.objects.filter(pk=node.pk).update(last_seen_at=timezone.now())
