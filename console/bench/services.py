"""User workflows of benchmark runs: validate and create (and enqueue), cancel.

Views, the API and commands call these. The run's state transitions (claim, finish, the
lost-worker sweep) live in lifecycle.py and the configuration snapshot in snapshots.py, so the
task and its execution shell never import this module: services -> tasks -> execution ->
lifecycle, one direction.
"""

from __future__ import annotations

import secrets
import uuid
from typing import Any

from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from console.audit.choices import Action
from console.audit.services import record
from console.bench.choices import Preset, RunStatus
from console.bench.models import BenchmarkRun
from console.bench.presets import validate_tier_profiles
from console.celery import app
from console.fleet.models import Endpoint
from loadgen import SpecError, WorkloadSpec

# Extra seconds a run's Celery time limit allows past its planned duration (storing, slow ends).
TIME_LIMIT_MARGIN_S = 300
DEFAULT_TIME_LIMIT_S = 3600


class RunError(ValueError):
    """Bad input for a run; `field` names what is wrong (the API turns it into a 400)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def default_model(endpoint: Endpoint) -> str:
    """The model a one-click run uses: the endpoint's default, its first model, or what the
    node's engine serves."""
    if endpoint.default_model:
        return endpoint.default_model
    if endpoint.models:
        return str(endpoint.models[0])
    if endpoint.node is not None and (endpoint.node.engine or {}).get("model"):
        return str(endpoint.node.engine["model"])
    return ""


def validate_workload(workload: dict[str, Any]) -> dict[str, Any]:
    """The workload as WorkloadSpec stores it; SpecError's "field: rule" becomes RunError."""
    try:
        spec = WorkloadSpec.from_dict(workload)
    except SpecError as exc:
        field, _, message = str(exc).partition(": ")
        raise RunError(
            f"workload.{field}" if message else "workload", message or str(exc)
        ) from None
    except (TypeError, ValueError) as exc:
        raise RunError("workload", str(exc)) from None
    if spec.prompts_file:
        # A path on the worker's disk: not something a browser or API client may name.
        raise RunError("workload.prompts_file", "not accepted here; use tier_profiles")
    return spec.to_dict()


def planned_duration_s(workload: dict[str, Any]) -> float | None:
    if workload.get("stages"):
        return float(sum(s["duration_s"] for s in workload["stages"]))
    if workload.get("duration_s"):
        return float(workload["duration_s"]) + float(workload.get("warmup_s") or 0)
    return None


def time_limit_s(workload: dict[str, Any]) -> int:
    planned = planned_duration_s(workload)
    return DEFAULT_TIME_LIMIT_S if planned is None else int(planned) + TIME_LIMIT_MARGIN_S


def create_run(
    *,
    endpoint: Endpoint,
    workload: dict[str, Any],
    user: Any = None,
    request: HttpRequest | None = None,
    model: str = "",
    preset: str = Preset.CUSTOM,
    tier_profiles: dict[str, Any] | None = None,
    label: str = "",
    notes: str = "",
    enqueue: bool = True,
    series: Any = None,
) -> BenchmarkRun:
    """Validate, store a pending run, and queue its task once the transaction commits."""
    model = model or str(workload.get("model") or "") or default_model(endpoint)
    if not model:
        raise RunError("model", "required (the endpoint names no default model)")
    profiles = validate_tier_profiles(tier_profiles) if tier_profiles else {}
    if profiles:
        workload = {**workload, "tier_mix": {t: p["weight"] for t, p in profiles.items()}}
    if workload.get("salt") is None:
        # A fresh salt per run: no run finds an earlier one's prompts in the prefix cache.
        # An explicit salt (a rerun that must send the very same prompts) is kept; "" is none.
        workload = {**workload, "salt": new_salt()}
    clean = validate_workload({**workload, "base_url": endpoint.base_url, "model": model})
    with transaction.atomic():
        run = BenchmarkRun.objects.create(
            endpoint=endpoint,
            model=model,
            preset=preset,
            workload=clean,
            tier_profiles=profiles,
            label=label,
            notes=notes,
            created_by=user if getattr(user, "is_authenticated", False) else None,
            celery_task_id=new_task_id(),
            series=series,
        )
        record(
            action=Action.RUN,
            obj=run,
            after=run.audit_dict(),
            user=user,
            request=request,
            message=f"benchmark against {endpoint.name}",
        )
        if enqueue:
            transaction.on_commit(lambda: enqueue_run(run))
    return run


def new_task_id() -> str:
    return str(uuid.uuid4())


def new_salt() -> str:
    return f"run-{secrets.token_hex(4)}"


def enqueue(task: str, args: tuple[Any, ...], task_id: str, limit: int) -> None:
    """Queue one of console/bench/tasks.py's tasks by its name, under a time limit. By name:
    the tasks call back into this app (a run series asks console.bench.adaptive for another
    round), so importing them here would close an import circle."""
    app.send_task(task, args, task_id=task_id, time_limit=limit, soft_time_limit=limit - 10)


def enqueue_run(run: BenchmarkRun) -> None:
    enqueue("bench.run_benchmark", (run.pk,), run.celery_task_id, time_limit_s(run.workload))


def request_cancel(
    run: BenchmarkRun, user: Any = None, request: HttpRequest | None = None
) -> BenchmarkRun:
    """A pending run is cancelled at once; a running one is flagged, and its task stops at
    its next progress report (within about a second) and keeps what completed."""
    now = timezone.now()
    with transaction.atomic():
        if BenchmarkRun.objects.filter(pk=run.pk, status=RunStatus.PENDING).update(
            status=RunStatus.CANCELLED,
            status_reason="cancelled before it started",
            cancel_requested=True,
            finished_at=now,
        ):
            revoke = True
        else:
            BenchmarkRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
                cancel_requested=True
            )
            revoke = False
        run.refresh_from_db()
        record(
            action=Action.CANCEL, obj=run, user=user, request=request, message="cancel requested"
        )
    if revoke and run.celery_task_id:
        app.control.revoke(run.celery_task_id)
    return run
