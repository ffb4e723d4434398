"""One trial of a sweep, in the steps the executor takes: its version, its benchmark series,
its score. Each step is written to the trial's row before the next, so a resumed executor
knows how far the last one got (console/bench/sweeps/executor.py).

    outcomes(sweep) -> [(trial, TrialOutcome)]       # the finished trials, by index
    best_of(outcomes) -> (trial | None, result)      # the best: only one decided "better"
    new_trial(sweep, values) -> SweepTrial           # the planner's next assignment, stored
    version_of(sweep, trial) -> the version it runs  # made (and stored) on first use
    new_series(sweep, trial) -> RunSeries            # its `repeats` pending benchmark runs
    discard_series(trial, reason)                    # a dead worker's runs, before a re-run
    score(sweep, series) -> fields                   # metrics, feasibility, objective, and
                                                     # the decision against the base

A trial's benchmarks are ordinary runs (bench/services.create_run) in a RunSeries, executed
here one after another by bench/execution: each with its config snapshot and its prefix-cache
reset, so the compare page works on any two of them.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from console.bench import lifecycle, services, sides
from console.bench.choices import RunStatus, Side, Verdict
from console.bench.models import BenchmarkRun, RequestSample, RunSeries
from console.bench.sweeps import scoring
from console.bench.sweeps.choices import SweepKind, TrialStatus
from console.bench.sweeps.inputs import default_max_in_flight, document_of
from console.bench.sweeps.models import Sweep, SweepTrial
from console.bench.sweeps.spec import TrialOutcome, apply_values
from console.tuning import services as tuning_services

# Trials the planner has seen the end of (a cancelled one ends the sweep, so never replanned).
PLANNED_FROM = (TrialStatus.SUCCEEDED, TrialStatus.FAILED, TrialStatus.SKIPPED)
VERSION_NAME_MAX = 100


def outcome_of(trial: SweepTrial) -> TrialOutcome:
    measured = trial.status == TrialStatus.SUCCEEDED
    return TrialOutcome(
        values=trial.values,
        feasible=bool(measured and trial.feasible),
        objective_value=trial.objective_value if measured else None,
    )


def outcomes(sweep: Sweep) -> list[tuple[SweepTrial, TrialOutcome]]:
    trials = sweep.trials.filter(status__in=PLANNED_FROM).order_by("index")
    return [(t, outcome_of(t)) for t in trials]


def best_of(outcomes: list[tuple[SweepTrial, TrialOutcome]]) -> tuple[SweepTrial | None, str]:
    """The best trial and what the sweep's result says: the best feasible trial among those
    whose decision against the base reads "better" (score); without one, the base
    (when it was measured and feasible): "no trial beats the base"."""
    if not outcomes:
        return None, ""
    better = [
        (t.decision or {}).get("outcome") == Verdict.BETTER and not t.is_base for t, _ in outcomes
    ]
    win = scoring.winner_index([o for _, o in outcomes], better)
    if win is not None:
        trial = outcomes[win][0]
        return trial, f"trial {trial.index} beats the base ({trial.values_label})"
    base = next((t for t, o in outcomes if t.is_base and o.feasible), None)
    return base, "no trial beats the base"


def base_document(sweep: Sweep) -> dict[str, Any]:
    return document_of(sweep.kind, sweep.base_tier_config, sweep.base_launch_profile)


def new_trial(sweep: Sweep, values: dict[str, Any]) -> SweepTrial | None:
    """Store the planner's next assignment as the next trial; None when another worker stored
    one first (the unique index), so the caller reads the trials again."""
    document = apply_values(
        sweep.kind,
        base_document(sweep),
        values,
        default_max_in_flight=default_max_in_flight(sweep.base_launch_profile),
    )
    index = (sweep.trials.aggregate(top=Max("index"))["top"] or 0) + 1
    try:
        with transaction.atomic():
            return SweepTrial.objects.create(
                sweep=sweep, index=index, is_base=not values, values=values, document=document
            )
    except IntegrityError:
        return None


def version_name(sweep: Sweep, trial: SweepTrial) -> str:
    """A name of its own per trial, `default-sweep1-trial2` (its one version: v1), so a trial's
    version reads as the sweep's and is not taken for a version of the base's name; the base's
    name is cut first when the whole is too long for a name."""
    suffix = f"-sweep{sweep.pk}-trial{trial.index}"
    return sweep.base_version.name[: VERSION_NAME_MAX - len(suffix)] + suffix


def version_message(sweep: Sweep, trial: SweepTrial) -> str:
    values = ", ".join(f"{path}={value}" for path, value in trial.values.items())
    return f"sweep #{sweep.pk} trial {trial.index}: {values}"[:500]


def version_of(sweep: Sweep, trial: SweepTrial) -> Any:
    """The version the trial runs: the base itself for the base trial, else one made for it
    (once: it is stored on the trial in the same transaction, and a resumed trial reuses it)."""
    field = "tier_config" if sweep.kind == SweepKind.TIER_CONFIG else "launch_profile"
    if getattr(trial, f"{field}_id"):
        return getattr(trial, field)
    with transaction.atomic():
        if trial.is_base or not trial.values:
            version = sweep.base_version
        elif sweep.kind == SweepKind.TIER_CONFIG:
            version = tuning_services.create_tier_config(
                name=version_name(sweep, trial),
                config=trial.document,
                message=version_message(sweep, trial),
                user=sweep.created_by,
                parent=sweep.base_version,
            )
        else:
            version = tuning_services.create_launch_profile(
                name=version_name(sweep, trial),
                args=trial.document,
                message=version_message(sweep, trial),
                user=sweep.created_by,
                parent=sweep.base_version,
                engines=[sweep.node],  # the engine it runs on
            )
        SweepTrial.objects.filter(pk=trial.pk).update(**{field: version})
        setattr(trial, field, version)
    return version


def new_series(sweep: Sweep, trial: SweepTrial) -> RunSeries:
    """The trial's `repeats` runs, pending, in one series stored on the trial; nothing is
    queued: the executor runs them in its own thread, between its other steps."""
    label = f"{sweep} trial {trial.index} ({trial.values_label})"[:200]
    workload = {k: v for k, v in sweep.workload.items() if k not in ("salt", "api_key")}
    with transaction.atomic():
        series = RunSeries.objects.create(
            label=label, side=Side.A, repeats=sweep.repeats, created_by=sweep.created_by
        )
        for repeat in range(sweep.repeats):
            services.create_run(
                endpoint=sweep.endpoint,
                workload=workload,
                user=sweep.created_by,
                model=sweep.model,
                preset=sweep.preset,
                tier_profiles=sweep.tier_profiles or None,
                label=f"{label} · {repeat + 1}/{sweep.repeats}"[:200],
                notes=f"measured by {sweep}",
                enqueue=False,
                series=series,
            )
        SweepTrial.objects.filter(pk=trial.pk).update(series=series)
        trial.series = series
    return series


def discard_series(trial: SweepTrial, reason: str) -> None:
    """The runs a lost worker left of this trial's series: the running one failed, the pending
    ones cancelled, so a re-run of the trial starts from a new series and nothing hangs."""
    if trial.series_id is None:
        return
    runs = BenchmarkRun.objects.filter(series_id=trial.series_id)
    for run_id in runs.filter(status=RunStatus.RUNNING).values_list("pk", flat=True):
        lifecycle.finish(run_id, RunStatus.FAILED, reason)
    runs.filter(status=RunStatus.PENDING).update(
        status=RunStatus.CANCELLED, status_reason=reason[:500], finished_at=timezone.now()
    )
    RunSeries.objects.filter(pk=trial.series_id).update(cancel_requested=True)


def _gpu_count(run: BenchmarkRun) -> int:
    nodes = (run.config_snapshot or {}).get("nodes") or [{}]
    count = ((nodes[0] or {}).get("gpu") or {}).get("count") or 1
    return max(int(count), 1)


def decision_against_base(sweep: Sweep, base_series_id: int, series_id: int) -> dict[str, Any]:
    """The trial's decision against the base trial (decisions.py), by the sweep's objective
    and its per-tier TTFT P99 caps as the SLOs; {} when either measured nothing."""
    found = sides.resolve_all({"a": f"s{base_series_id}", "b": f"s{series_id}"})
    if not (found["a"].runs and found["b"].runs):
        return {}
    caps = (sweep.constraints or {}).get("max_ttft_p99_ms") or {}
    slos = {tier: float(ms) / 1000 for tier, ms in caps.items()}
    decision: dict[str, Any] = sides.compare_sides(
        found["a"], found["b"], objective=sweep.objective, slos=slos
    )["decision"]
    return decision


def _decode_speed(run: BenchmarkRun) -> float | None:
    rows = RequestSample.objects.filter(run=run, warmup=False, status=200, error="")
    return scoring.decode_speed(rows.values_list("output_tokens", "ttft", "e2e"))


def score(sweep: Sweep, series: RunSeries) -> dict[str, Any]:
    """The trial's fields once its runs have ended: status (failed when no run measured a
    request), metrics over the measured runs, feasibility with the constraints broken, and
    the objective's value. Without an error-rate constraint the runs' own rule stands in: a
    run failed for its error share (bench/outcomes.py) makes the trial infeasible."""
    runs = list(BenchmarkRun.objects.filter(series=series).order_by("pk"))
    measured = [r for r in runs if (r.summary or {}).get("overall", {}).get("count")]
    if not measured:
        reasons = "; ".join(f"run #{r.pk} {r.status}: {r.status_reason}" for r in runs)
        return {"status": TrialStatus.FAILED, "error": f"nothing measured ({reasons})"[:2000]}
    metrics = scoring.trial_metrics(
        [r.summary for r in measured],
        gpu_count=_gpu_count(measured[0]),
        user_speeds=[_decode_speed(r) for r in measured],
    )
    spec = sweep.spec()
    feasible, violations = scoring.evaluate(metrics, spec.constraints)
    if spec.constraints.max_error_rate is None:
        for run in runs:
            if run.status == RunStatus.FAILED:
                violations.append(f"benchmark #{run.pk} failed: {run.status_reason}"[:300])
                feasible = False
    base = sweep.trials.filter(index=0).values_list("series_id", flat=True).first()
    return {
        "status": TrialStatus.SUCCEEDED,
        "metrics": metrics,
        "feasible": feasible,
        "violations": violations,
        "objective_value": scoring.objective_value(metrics, spec.objective),
        "decision": (
            decision_against_base(sweep, base, series.pk) if base and base != series.pk else {}
        ),
    }
