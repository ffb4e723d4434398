"""Workflows of benchmark runs: create, cancel, claim, snapshot, detect lost workers.

Views, the API, Celery tasks and tests all call these; each status change is a conditional
UPDATE (hc's sendalerts habit), so racing hands (a redelivered task, a cancel click, the
lost-worker sweep, the finishing task) never overwrite each other's decision.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from console.audit.choices import Action
from console.audit.services import record
from console.bench.choices import Preset, RunStatus
from console.bench.models import BenchmarkRun
from console.bench.presets import validate_tier_profiles
from console.fleet.models import Endpoint, Node, TelemetrySample
from loadgen import SpecError, WorkloadSpec

# Progress is written about twice a second; a running run silent for this long lost its worker.
LOST_AFTER = timedelta(seconds=60)
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
) -> BenchmarkRun:
    """Validate, store a pending run, and queue its task once the transaction commits."""
    model = model or str(workload.get("model") or "") or default_model(endpoint)
    if not model:
        raise RunError("model", "required (the endpoint names no default model)")
    profiles = validate_tier_profiles(tier_profiles) if tier_profiles else {}
    if profiles:
        workload = {**workload, "tier_mix": {t: p["weight"] for t, p in profiles.items()}}
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
            celery_task_id=str(uuid.uuid4()),
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


def enqueue_run(run: BenchmarkRun) -> None:
    from console.bench.tasks import run_benchmark

    limit = time_limit_s(run.workload)
    run_benchmark.apply_async(
        (run.pk,), task_id=run.celery_task_id, time_limit=limit, soft_time_limit=limit - 10
    )


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
        from console.celery import app

        app.control.revoke(run.celery_task_id)
    return run


def claim(run_id: int, now: datetime | None = None) -> bool:
    """pending -> running, once: a redelivered task finds the run taken and does nothing."""
    now = now or timezone.now()
    return (
        BenchmarkRun.objects.filter(pk=run_id, status=RunStatus.PENDING).update(
            status=RunStatus.RUNNING,
            started_at=now,
            heartbeat_at=now,
        )
        == 1
    )


def finish(run_id: int, status: str, reason: str = "", **fields: Any) -> bool:
    """running -> a final state, unless something else (cancel of a pending run, the lost
    worker sweep) already decided; returns whether this call decided."""
    return (
        BenchmarkRun.objects.filter(pk=run_id, status=RunStatus.RUNNING).update(
            status=status,
            status_reason=reason[:500],
            finished_at=timezone.now(),
            **fields,
        )
        == 1
    )


def mark_lost_runs(now: datetime | None = None, lost_after: timedelta = LOST_AFTER) -> list[int]:
    """Fail every running run whose task stopped reporting (its worker died or was killed)."""
    now = now or timezone.now()
    stale = list(
        BenchmarkRun.objects.filter(
            status=RunStatus.RUNNING, heartbeat_at__lt=now - lost_after
        ).values_list("pk", flat=True)
    )
    lost = []
    for pk in stale:
        with transaction.atomic():
            if BenchmarkRun.objects.filter(
                pk=pk, status=RunStatus.RUNNING, heartbeat_at__lt=now - lost_after
            ).update(
                status=RunStatus.FAILED,
                finished_at=now,
                status_reason=(
                    f"worker lost: no progress for over {int(lost_after.total_seconds())} s"
                ),
            ):
                record(
                    action=Action.UPDATE,
                    object_type="bench.benchmarkrun",
                    object_id=str(pk),
                    object_repr=f"benchmark #{pk}",
                    message="marked failed: worker lost",
                )
                lost.append(pk)
    return lost


def _version_ref(version: Any, content_field: str) -> dict[str, Any] | None:
    if version is None:
        return None
    return {
        "id": version.pk,
        "name": version.name,
        "version": version.version,
        content_field: getattr(version, content_field),
    }


def node_snapshot(node: Node) -> dict[str, Any]:
    """What a node ran when the run started: applied versions (the desired ones only stand in
    while nothing was applied yet), engine flags, GPU model from its latest sample."""
    last = TelemetrySample.objects.filter(node=node).order_by("-ts").first()
    gpus = [g.get("name") or "unknown" for g in (last.gpus if last else [])]
    tier = node.applied_tier_config or node.desired_tier_config
    profile = node.applied_launch_profile or node.desired_launch_profile
    return {
        "id": node.pk,
        "name": node.name,
        "mode": node.mode,
        "agent_version": node.agent_version,
        "tier_config": _version_ref(tier, "config"),
        "tier_config_applied": node.applied_tier_config_id is not None,
        "launch_profile": _version_ref(profile, "args"),
        "launch_profile_applied": node.applied_launch_profile_id is not None,
        "engine": {
            "model": (node.engine or {}).get("model"),
            "args": (node.engine or {}).get("args", {}),
            "simulated": node.is_simulated,
        },
        "gpu": {"models": gpus, "count": len(gpus), "source": last.gpu_source if last else None},
    }


def snapshot_config(endpoint: Endpoint) -> dict[str, Any]:
    nodes = [endpoint.node] if endpoint.node is not None else []
    return {
        "taken_at": timezone.now().isoformat(),
        "endpoint": {
            "id": endpoint.pk,
            "name": endpoint.name,
            "kind": endpoint.kind,
            "base_url": endpoint.base_url,
        },
        "nodes": [node_snapshot(n) for n in nodes],
    }
