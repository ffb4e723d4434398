"""The best tier config for the headline's workload: coordinate descent from seed 000's config,
one variable at a time (the seed's own rule: change one thing per benchmark), each trial a short
run of the arms' workload through the gateway.

The descent is the sweeps' own (console/bench/sweeps/planner.py, COORDINATE mode: each value on
top of the best feasible assignment so far, kept when it beats it on the objective), so the
console's sweeps and the headline share one definition. A coordinate is named by a label
(`max_awaiting_first_token`, `waits`) and its values are labels of config transforms
(`candidate_axes`), which the planner treats as opaque; a trial's document is seed 000's config
with the transforms of its assignment applied in the axes' order.

Scoring is the sweeps' too (scoring.py): objective lowest online TTFT P99, and a trial is
feasible under `acceptance(...)`'s constraints, the headline's rule resolved against what was
measured: nothing rejected or failed (error rate 0), requests finished per second inside the
window at least `THROUGHPUT_FLOOR` x the best any trial reached so far (this one included), and
batch and offline TTFT P99 within `TIER_COST_CAP` x the seed config's trial: the winner cannot
buy online latency with lost work or by parking the whole backlog on one tier.

A trial's throughput is the engine's delivery rate inside the window (ArmOutcome.
done_in_window_rps): the loadgen's own figure also counts the drain after the deadline, which in
a short trial is mostly how long the last offline request waited, not how much work the engine
did. Its error rate counts the gateway's rejections as well as the client's failures.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from console.bench.headline.arms import ArmOutcome, Setup, run_arm
from console.bench.headline.catalog import Arm
from console.bench.headline.workload import SEED_TIER_CONFIG, TIERS, with_admission, with_waits
from console.bench.sweeps import planner, scoring
from console.bench.sweeps.choices import Objective, SweepKind, SweepMode
from console.bench.sweeps.spec import Constraints, SweepSpec, TrialOutcome, Variable

THROUGHPUT_FLOOR = 0.97
TIER_COST_CAP = 1.5
OBJECTIVE = Objective.MIN_ONLINE_TTFT_P99
INF = float("inf")
Log = Callable[[str], None]
Transform = Callable[[dict[str, Any]], dict[str, Any]]
Axes = Sequence[tuple[str, Sequence[tuple[str, Transform]]]]
# A trial's run: (its index, label, tier config) -> its metrics (trial_metrics).
Measure = Callable[[int, str, dict[str, Any]], dict[str, Any]]


def candidate_axes() -> list[tuple[str, list[tuple[str, Transform]]]]:
    """The coordinates searched, in order, each with its values (label, config transform)."""

    def adm(**kw: Any) -> Transform:
        return lambda cfg: with_admission(cfg, **kw)

    def reserve(n: int) -> Transform:
        # Reserved slots come off max_in_flight: without a cap near the engine's max_num_seqs
        # (32 here) they would reserve slots the engine never runs at once anyway.
        def transform(cfg: dict[str, Any]) -> dict[str, Any]:
            cap = cfg["scheduler"].get("admission", {}).get("max_in_flight") or 32
            return with_admission(cfg, max_in_flight=cap, reserved_slots=n)

        return transform

    def waits(online: int, batch: int, offline: int) -> Transform:
        return lambda cfg: with_waits(cfg, {"online": online, "batch": batch, "offline": offline})

    return [
        (
            "max_awaiting_first_token",
            [(str(n), adm(max_awaiting_first_token=n)) for n in (1, 2, 8)],
        ),
        ("max_in_flight", [(str(n), adm(max_in_flight=n)) for n in (32, 24)]),
        ("reserved_slots", [(str(n), reserve(n)) for n in (4, 8)]),
        ("waits", [("2/10/50 ms", waits(2, 10, 50)), ("1/1/1 ms", waits(1, 1, 1))]),
    ]


def spec_of(axes: Axes) -> SweepSpec:
    """The axes as the planner's coordinate-descent spec (constraints resolve per trial)."""
    variables = tuple(Variable(axis, tuple(label for label, _ in values)) for axis, values in axes)
    return SweepSpec(SweepKind.TIER_CONFIG, SweepMode.COORDINATE, variables, objective=OBJECTIVE)


def document(axes: Axes, assignment: Mapping[str, Any]) -> dict[str, Any]:
    """Seed 000's config with the assignment's transforms, in the axes' order."""
    cfg = SEED_TIER_CONFIG
    for axis, values in axes:
        if axis in assignment:
            cfg = dict(values)[assignment[axis]](cfg)
    return cfg


def trial_metrics(outcome: ArmOutcome) -> dict[str, Any]:
    """scoring.trial_metrics of the run, with the headline's throughput and error rate."""
    metrics = scoring.trial_metrics([outcome.result.summary])
    overall = outcome.tier_row("overall")
    requests = max(int(overall["requests"]), 1)
    metrics["loadgen_throughput_rps"] = metrics["throughput_rps"]
    metrics["throughput_rps"] = outcome.done_in_window_rps()
    metrics["rejected_or_failed"] = int(overall["rejected"]) + int(overall["errors"])
    metrics["error_rate"] = max(metrics["error_rate"] or 0.0, int(overall["rejected"]) / requests)
    return metrics


def acceptance(seed: Mapping[str, Any], top_rps: float) -> Constraints:
    """The headline's rule as the sweeps' constraints, resolved against the seed config's
    trial and the best throughput so far."""
    seed_p99 = seed.get("ttft_p99_ms") or {}
    caps = {t: TIER_COST_CAP * seed_p99[t] for t in TIERS[1:] if seed_p99.get(t) is not None}
    return Constraints(
        min_throughput_rps=THROUGHPUT_FLOOR * top_rps, max_error_rate=0.0, max_ttft_p99_ms=caps
    )


def describe(assignment: Mapping[str, Any]) -> list[str]:
    return [f"{axis}={value}" for axis, value in assignment.items()]


def descend(axes: Axes, measure: Measure, log: Log = print) -> dict[str, Any]:
    """Ask the planner for each trial until it is done; measure, score and record each."""
    spec = spec_of(axes)
    outcomes: list[TrialOutcome] = []
    trials: list[dict[str, Any]] = []
    seed: dict[str, Any] = {}
    top_rps = 0.0
    while (assignment := planner.next_trial(spec, outcomes)) is not None:
        kept = describe(planner.best_assignment(spec, outcomes)) if outcomes else []
        changed = [f"{a}={v}" for a, v in assignment.items() if f"{a}={v}" not in kept]
        label = (
            f"{', '.join(changed)} (on: {', '.join(kept) or 'seed'})"
            if assignment
            else "seed 000 config"
        )
        cfg = document(axes, assignment)
        metrics = measure(len(trials), label, cfg)
        seed = seed or metrics
        top_rps = max(top_rps, metrics["throughput_rps"])
        feasible, violations = scoring.evaluate(metrics, acceptance(seed, top_rps))
        value = scoring.objective_value(metrics, OBJECTIVE)
        outcomes.append(TrialOutcome(assignment, feasible, value))
        p99 = metrics["ttft_p99_ms"]
        record = {
            "label": label,
            "values": assignment,
            "config": cfg,
            **{f"{t}_ttft_p99_ms": p99.get(t) if p99.get(t) is not None else INF for t in TIERS},
            "done_in_window_rps": metrics["throughput_rps"],
            "rejected_or_failed": metrics["rejected_or_failed"],
            "accepted": feasible,
            "violations": violations,
            "objective_value": value,
            "metrics": metrics,
        }
        trials.append(record)
        log(
            f"search: {label:60s} TTFT P99 online {record['online_ttft_p99_ms']:6.0f} / batch "
            f"{record['batch_ttft_p99_ms']:6.0f} / offline {record['offline_ttft_p99_ms']:6.0f} "
            f"ms, {record['done_in_window_rps']:6.2f} done/s, "
            f"{record['rejected_or_failed']} rejected/failed"
            + (f"; refused: {'; '.join(violations)}" if violations else "")
        )
    best_values = planner.best_assignment(spec, outcomes)
    best = next(t for t in trials if t["values"] == best_values)
    return {
        "planner": {"mode": spec.mode, "objective": spec.objective,
                    "variables": spec.variables_dicts()},
        "throughput_floor": THROUGHPUT_FLOOR,
        "tier_cost_cap": TIER_COST_CAP,
        "trials": trials,
        "best_config": best["config"],
        "best_path": ["seed 000 config", *describe(best_values)],
        "best_trial": best,
    }  # fmt: skip


def search_tier_config(
    setup: Setup,
    *,
    policy: str,
    trial_s: float,
    log: Log = print,
    axes: Axes | None = None,
) -> dict[str, Any]:
    """The descent over `axes` (default: candidate_axes()), each trial a `trial_s` run through
    a fresh gateway and engine on `policy`; returns the best config and every trial."""

    def measure(index: int, label: str, cfg: dict[str, Any]) -> dict[str, Any]:
        arm = Arm("t", f"trial-{index}", label, policy, cfg)
        return trial_metrics(run_arm(arm, setup, duration_s=trial_s))

    found = descend(candidate_axes() if axes is None else axes, measure, log)
    return {"engine_policy": policy, "trial_seconds": trial_s, **found}
