"""Sweeps written straight into the database, as the executor would leave them, for the page
and browser tests (the executor's own tests run the real thing)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from console.bench.models import RunSeries
from console.bench.sweeps.choices import SweepKind, SweepStatus, TrialStatus
from console.bench.sweeps.models import Sweep, SweepTrial
from console.fleet import services as fleet_services
from console.fleet.choices import EndpointKind, NodeMode
from console.fleet.models import Endpoint, Node
from console.tuning import services as tuning_services
from tests.bench.conftest import TIER_CONFIG, stored_run

PATH = "scheduler.queues.online.max_waiting_time_ms"


def node_with_versions(name: str = "sweep-node", *, profile: bool = True) -> Any:
    """A managed node told to run a tier config (and a launch profile), with a gateway
    endpoint no process answers."""
    node, _token = fleet_services.create_node(name, [], None)
    tier = tuning_services.create_tier_config(
        name=f"{name}-tiers", config=TIER_CONFIG, message="test", user=None
    )
    launch = (
        tuning_services.create_launch_profile(
            name=f"{name}-engine", args={"model": "m1", "max_num_seqs": 64}, message="t", user=None
        )
        if profile
        else None
    )
    Node.objects.filter(pk=node.pk).update(
        desired_tier_config=tier,
        applied_tier_config=tier,
        desired_launch_profile=launch,
        applied_launch_profile=launch,
        mode=NodeMode.MANAGED,
    )
    fleet_services.create_endpoint(
        None,
        name=f"{name}-gw",
        base_url="http://127.0.0.1:9/v1",
        api_key="sk-test-sweep-000000000",
        kind=EndpointKind.GATEWAY,
        node=node,
        default_model="m1",
    )
    node.refresh_from_db()
    return node


def metrics(rps: float, ttft_online: float, per_user: float, per_gpu: float) -> dict[str, Any]:
    return {
        "throughput_rps": rps,
        "output_tokens_per_s": rps * 20,
        "tokens_per_s_per_user": per_user,
        "tokens_per_s_per_gpu": per_gpu,
        "error_rate": 0.0,
        "ttft_p99_ms": {"online": ttft_online, "batch": ttft_online * 2, "overall": ttft_online},
        "ttft_p50_ms": {"online": ttft_online / 3, "overall": ttft_online / 3},
        "requests": 100,
        "repeats": 2,
    }


# (value, metrics, feasible, violations): the base first.
TRIALS: list[tuple[Any, dict[str, Any], bool, list[str]]] = [
    (None, metrics(10, 300, 50, 400), True, []),
    (1, metrics(12, 150, 60, 500), True, []),
    (5, metrics(14, 260, 45, 650), True, []),
    (10, metrics(16, 900, 30, 700), False, ["online TTFT P99 900 ms > cap 500 ms"]),
    (20, metrics(18, 1400, 25, 720), False, ["online TTFT P99 1400 ms > cap 500 ms"]),
]


def _decision(index: int) -> dict[str, Any]:
    """Trial 1 decided better than the base (the best); the others undecided."""
    if index == 0:
        return {}
    if index == 1:
        return {"outcome": "better", "headline": "better", "text": "as the test wrote it"}
    more = "not enough data: about 3 more runs a side would decide at this noise"
    return {"outcome": "not enough data", "headline": more, "text": "as the test wrote it"}


def _series(endpoint: Any, ttft_scale: float, runs: int, seed: int) -> RunSeries:
    series = RunSeries.objects.create(label="trial", repeats=runs)
    for i in range(runs):
        run = stored_run(endpoint, ttft_scale=ttft_scale, n=60, seed=seed * 10 + i)
        run.series = series
        run.save(update_fields=["series"])
    return series


def finished_sweep(
    node: Any,
    *,
    status: str = SweepStatus.SUCCEEDED,
    with_runs: bool = True,
    trials: list[tuple[Any, dict[str, Any], bool, list[str]]] | None = None,
) -> Sweep:
    """A sweep of the online batching window with its trials measured; the best (lowest
    online TTFT P99 among the feasible) is trial 1."""
    endpoint = Endpoint.objects.get(node=node)
    trials = TRIALS if trials is None else trials
    now = timezone.now()
    finished = status not in (SweepStatus.PENDING, SweepStatus.RUNNING)
    sweep = Sweep.objects.create(
        name="online window",
        node=node,
        endpoint=endpoint,
        model="m1",
        kind=SweepKind.TIER_CONFIG,
        base_tier_config=node.desired_tier_config,
        base_launch_profile=node.desired_launch_profile,
        variables=[{"path": PATH, "values": [v for v, *_ in trials[1:]]}],
        preset="mixed-tiers",
        workload={"concurrency": 8, "requests": 60},
        repeats=2,
        constraints={"max_ttft_p99_ms": {"online": 500}},
        status=status,
        trials_planned=len(trials),
        trials_done=len(trials) if finished else 2,
        eta_s=None if finished else 250.0,
        started_at=now,
        finished_at=now if finished else None,
        restored=finished,
    )
    rows = []
    for index, (value, m, feasible, violations) in enumerate(trials):
        done = finished or index < 2
        rows.append(
            SweepTrial.objects.create(
                sweep=sweep,
                index=index,
                is_base=index == 0,
                values={} if index == 0 else {PATH: value},
                document=TIER_CONFIG,
                tier_config=node.desired_tier_config if index == 0 else None,
                status=TrialStatus.SUCCEEDED if done else TrialStatus.PENDING,
                series=(
                    _series(endpoint, m["ttft_p99_ms"]["online"] / 3000, 2, index)
                    if with_runs and done
                    else None
                ),
                metrics=m if done else {},
                feasible=feasible if done else None,
                violations=violations if done else [],
                objective_value=m["ttft_p99_ms"]["online"] if done else None,
                decision=_decision(index) if done else {},
                apply_s=1.5 if done else None,
                bench_s=20.0 if done else None,
            )
        )
    if finished:
        sweep.best_trial = rows[1]
        sweep.save(update_fields=["best_trial"])
    return sweep
