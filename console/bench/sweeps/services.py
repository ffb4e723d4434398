"""Sweep workflows: create, cancel and adopt. The API, the views and the tasks call these;
each writes its audit event in the same transaction as its change.

    create_sweep(data, user, request=None) -> Sweep
    cancel_sweep(sweep, user, request=None) -> Sweep
    adopt_trial(sweep, trial, user, request=None) -> Rollout

Every refusal is an inputs.SweepError naming the field (conflict=True: the sweep's state
forbids it now).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from console.audit.choices import Action
from console.audit.services import record
from console.bench import services as bench_services
from console.bench.choices import Verdict
from console.bench.sweeps.choices import ACTIVE, FINISHED, SweepKind, SweepStatus, TrialStatus
from console.bench.sweeps.guards import active_sweep_of
from console.bench.sweeps.inputs import (
    SweepError,
    base_versions,
    check_tiers,
    default_max_in_flight,
    document_of,
    endpoint_of,
    lookup,
    repeats_of,
    workload_of,
)
from console.bench.sweeps.models import Sweep, SweepTrial
from console.bench.sweeps.planner import planned_count
from console.bench.sweeps.spec import SpecError, SweepSpec, check_values, parse_spec
from console.fleet.models import Node
from console.tuning import services as tuning_services
from console.tuning.rollouts import services as rollout_services
from console.tuning.rollouts.choices import NodeSelection, StaleTargets
from console.tuning.rollouts.models import Rollout
from console.tuning.rollouts.targets import RolloutError
from console.tuning.vllm_args import ArgsError

__all__ = ["SweepError", "adopt_trial", "cancel_sweep", "create_sweep"]


def _user(user: Any) -> Any:
    return user if user is not None and getattr(user, "is_authenticated", False) else None


def _spec(data: Mapping[str, Any]) -> SweepSpec:
    try:
        return parse_spec(
            {
                k: data[k]
                for k in ("kind", "mode", "variables", "constraints", "objective")
                if k in data
            }
        )
    except SpecError as exc:
        raise SweepError(exc.field, exc.message) from None


def _enqueue(sweep: Sweep) -> None:
    # Imported here: the task module imports the executor, which may need this module.
    from console.bench.sweeps import tasks

    tasks.enqueue(sweep)


def _check_node_free(node: Node) -> None:
    """One sweep at a time per node, and none while a rollout owns its versions. Inside the
    creating transaction, with the node's row locked, so two creates cannot both pass."""
    Node.objects.select_for_update().filter(pk=node.pk).values_list("pk", flat=True).first()
    busy = active_sweep_of(node)
    if busy is not None:
        raise SweepError("node", busy)
    reason = rollout_services.unfinished_rollout_of(node)
    if reason:
        raise SweepError("node", reason)


def _check_on_engine(spec: SweepSpec, base: Mapping[str, Any], node: Node) -> None:
    """Each value of a launch-profile sweep as the node's engine parses it: the check every
    launch profile takes before it is stored (tuning.services.check_launch_args), here before
    the sweep is, so a value the engine refuses is named now rather than failing its trial."""
    for i, variable in enumerate(spec.variables):
        for j, value in enumerate(variable.values):
            try:
                tuning_services.check_launch_args({**base, variable.path: value}, nodes=[node])
            except ArgsError as exc:
                raise SweepError(f"variables[{i}].values[{j}]", exc.errors[0].message) from None


def create_sweep(data: Mapping[str, Any], user: Any, request: HttpRequest | None = None) -> Sweep:
    """Validate everything (the spec, every value applied to the base, the workload), then
    store the sweep with its base trial (index 0) and queue it once that is committed."""
    if data.get("node") is None:
        raise SweepError("node", "is required")
    node: Node = lookup(Node, data["node"], "node")
    spec = _spec(data)
    tier_config, launch_profile = base_versions(node, spec.kind)
    base = document_of(spec.kind, tier_config, launch_profile)
    try:
        check_values(spec, base, default_max_in_flight=default_max_in_flight(launch_profile))
    except SpecError as exc:
        raise SweepError(exc.field, exc.message) from None
    if spec.kind != SweepKind.TIER_CONFIG:
        _check_on_engine(spec, base, node)
    endpoint = endpoint_of(node, data.get("endpoint"))
    model = str(data.get("model") or "") or bench_services.default_model(endpoint)
    if not model:
        raise SweepError("model", "required (the endpoint names no default model)")
    workload = workload_of(data, endpoint, model)
    check_tiers(spec, workload)
    repeats = repeats_of(data.get("repeats"))
    name = str(data.get("name") or "")
    if len(name) > 200:
        raise SweepError("name", "at most 200 characters")
    with transaction.atomic():
        _check_node_free(node)
        sweep = Sweep.objects.create(
            name=name,
            node=node,
            endpoint=endpoint,
            model=model,
            kind=spec.kind,
            base_tier_config=tier_config,
            base_launch_profile=launch_profile,
            mode=spec.mode,
            variables=spec.variables_dicts(),
            preset=workload.preset,
            workload=workload.workload,
            tier_profiles=workload.tier_profiles,
            repeats=repeats,
            constraints=spec.constraints.to_dict(),
            objective=spec.objective,
            trials_planned=planned_count(spec),
            created_by=_user(user),
        )
        is_tier = spec.kind == SweepKind.TIER_CONFIG
        SweepTrial.objects.create(
            sweep=sweep,
            index=0,
            is_base=True,
            values={},
            document=base,
            tier_config=tier_config if is_tier else None,
            launch_profile=None if is_tier else launch_profile,
        )
        record(
            action=Action.CREATE,
            obj=sweep,
            after=sweep.audit_dict(),
            user=user,
            request=request,
            message=f"sweep of {node.name}: {sweep.trials_planned} trial(s) at most",
        )
        transaction.on_commit(lambda: _enqueue(sweep))
    return sweep


def cancel_sweep(sweep: Sweep, user: Any, request: HttpRequest | None = None) -> Sweep:
    """A pending sweep ends cancelled at once (it never touched the node); a running one is
    asked to stop: its worker sets the node back on its base and ends it cancelled."""
    now = timezone.now()
    with transaction.atomic():
        ended = Sweep.objects.filter(pk=sweep.pk, status=SweepStatus.PENDING).update(
            status=SweepStatus.CANCELLED,
            cancel_requested=True,
            status_reason="cancelled before it started",
            finished_at=now,
            restored=True,
        )
        if ended:
            SweepTrial.objects.filter(sweep=sweep, status=TrialStatus.PENDING).update(
                status=TrialStatus.CANCELLED, finished_at=now
            )
        asked = ended or Sweep.objects.filter(pk=sweep.pk, status__in=ACTIVE).update(
            cancel_requested=True
        )
        if not asked:
            sweep.refresh_from_db()
            raise SweepError("status", f"the sweep is already {sweep.status}", conflict=True)
        sweep.refresh_from_db()
        record(
            action=Action.CANCEL,
            obj=sweep,
            after={"status": sweep.status, "cancel_requested": True},
            user=user,
            request=request,
            message="cancelled" if ended else "cancel requested",
        )
    return sweep


def check_adoptable(sweep: Sweep, trial: SweepTrial) -> None:
    if trial.sweep_id != sweep.pk:
        raise SweepError("trial", f"{trial} is not a trial of {sweep}")
    if sweep.status not in FINISHED:
        raise SweepError("status", f"the sweep is still {sweep.status}", conflict=True)
    if not sweep.restored:
        raise SweepError("restored", "the node is not back on its base versions", conflict=True)
    if sweep.adopted_trial_id is not None:
        raise SweepError(
            "adopted_trial",
            f"trial {sweep.adopted_trial.index if sweep.adopted_trial else '?'} was already "
            f"adopted (rollout #{sweep.adopted_rollout_id})",
            conflict=True,
        )
    if trial.is_base:
        raise SweepError("trial", "the base is what the node already runs")
    if trial.status != TrialStatus.SUCCEEDED:
        raise SweepError("trial", f"trial {trial.index} is {trial.status}, not succeeded")
    if trial.feasible is not True:
        broken = "; ".join(trial.violations) or "not evaluated"
        raise SweepError("trial", f"trial {trial.index} is not feasible: {broken}")


def undecided(trial: SweepTrial) -> str:
    """Why adopting the trial is a guess ("" when its decision against the base is "better")."""
    decision = trial.decision or {}
    if decision.get("outcome") == Verdict.BETTER:
        return ""
    said = decision.get("headline") or "none recorded"
    return f"trial {trial.index} is not shown better than the base (decision: {said})"


def adopt_trial(
    sweep: Sweep,
    trial: SweepTrial,
    user: Any,
    request: HttpRequest | None = None,
    *,
    confirm_undecided: bool = False,
) -> Rollout:
    """The trial's document as the next version under the base's name (its message cites the
    sweep and trial), and a rollout of it to the sweep's node with the SLO guard on. One
    transaction: refused anywhere, nothing is written. A trial whose decision against the
    base is not "better" is adopted only with `confirm_undecided`."""
    message = f"adopted from sweep #{sweep.pk} trial {trial.index}: {trial.values_label}"
    with transaction.atomic():
        sweep = Sweep.objects.select_for_update().get(pk=sweep.pk)
        check_adoptable(sweep, trial)
        guess = undecided(trial)
        if guess and not confirm_undecided:
            raise SweepError(
                "confirm_undecided",
                f"{guess}: adopting it is a guess. Send confirm_undecided: true to adopt it "
                "anyway.",
            )
        if guess:
            message = f"{message} (confirmed though undecided)"
        base = sweep.base_version
        try:
            if sweep.kind == SweepKind.TIER_CONFIG:
                version: Any = tuning_services.create_tier_config(
                    name=base.name,
                    config=trial.document,
                    message=message,
                    user=user,
                    request=request,
                    parent=base,
                )
                targets = {"tier_config": version}
            else:
                version = tuning_services.create_launch_profile(
                    name=base.name,
                    args=trial.document,
                    message=message,
                    user=user,
                    request=request,
                    parent=base,
                    engines=[sweep.node],
                )
                targets = {"launch_profile": version}
            rollout = rollout_services.create_rollout(
                **targets,
                selection=NodeSelection.NODES,
                nodes=[sweep.node],
                stale_targets=StaleTargets.REFUSE,
                guard_max_ttft_p99_regression_pct=(
                    rollout_services.DEFAULT_GUARD_TTFT_P99_REGRESSION_PCT
                ),
                guard_max_error_rate=rollout_services.DEFAULT_GUARD_ERROR_RATE,
                message=message,
                user=user,
                request=request,
            )
        except RolloutError as exc:
            raise SweepError(exc.field, exc.message, conflict=True) from None
        except ValueError as exc:  # the document no longer validates (the schema moved on)
            raise SweepError("trial", f"its document is no longer valid: {exc}") from None
        claimed = Sweep.objects.filter(pk=sweep.pk, adopted_trial__isnull=True).update(
            adopted_trial=trial, adopted_rollout=rollout
        )
        if not claimed:
            raise SweepError("adopted_trial", "another adoption got there first", conflict=True)
        sweep.refresh_from_db()
        record(
            action=Action.UPDATE,
            obj=sweep,
            before={"adopted_trial": None, "adopted_rollout": None},
            after={"adopted_trial": trial.pk, "adopted_rollout": rollout.pk, "version": version.pk},
            user=user,
            request=request,
            message=f"trial {trial.index} adopted as {version.label}, {rollout}",
        )
    return rollout
