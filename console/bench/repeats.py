"""Repeated benchmarks (workflows): a series of N runs like a given one, or a pair of series
run interleaved (A B A B ...) for an A/B comparison whose verdicts include run-to-run noise.

A repeat copies the template run's endpoint, model, workload and tier profiles, and runs
against the target's configuration as it is now, with a fresh prompt salt per run. So a pair
on two different endpoints (two nodes, gateway against direct) is interleaved in time, and
drift between the sides (machine load, engine state) lands on both. A pair on one endpoint is
an A/A check unless the node changed between the template runs: then repeating both now
would measure the current configuration twice, and the pair is refused; repeat each side
while its configuration is applied and compare the two series (docs/benchmarks.md).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from console.audit.choices import Action
from console.audit.services import record
from console.bench import services
from console.bench.choices import RunStatus, Side
from console.bench.models import BenchmarkRun, RunSeries
from console.bench.results import config_diff

MAX_REPEATS = 20
DEFAULT_REPEATS = 3


def check_repeats(repeats: Any, field: str = "repeats") -> int:
    if isinstance(repeats, bool) or not isinstance(repeats, int):
        raise services.RunError(field, "must be an integer")
    if not 1 <= repeats <= MAX_REPEATS:
        raise services.RunError(field, f"must be between 1 and {MAX_REPEATS}")
    return repeats


def run_label(template: BenchmarkRun, series: RunSeries, number: int) -> str:
    """ "run 2/3: like #5", or in a pair "side B run 2/3: like #7 (pair #5 vs #7)": the list
    shows it after the run's own id, so the template's id is said to be a template's."""
    position = f"run {number}/{max(series.repeats, number)}: like #{template.pk}"
    if series.partner_id is None:
        return position
    pair = series.label.partition(": side")[0] or series.label
    return f"side {series.side} {position} ({pair})"


def copy_run(template: BenchmarkRun, series: RunSeries, user: Any, request: Any) -> BenchmarkRun:
    workload = {k: v for k, v in template.workload.items() if k not in ("salt", "api_key")}
    return services.create_run(
        endpoint=template.endpoint,
        workload=workload,
        user=user,
        request=request,
        model=template.model,
        preset=template.preset,
        tier_profiles=template.tier_profiles or None,
        label=run_label(template, series, series.runs.count() + 1)[:200],
        notes=template.notes,
        enqueue=False,
        series=series,
    )


def _new_series(
    template: BenchmarkRun, repeats: int, side: str, user: Any, label: str = ""
) -> RunSeries:
    return RunSeries.objects.create(
        label=label or f"repeats of #{template.pk}",
        side=side,
        template=template,
        repeats=repeats,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )


def enqueue(series: list[RunSeries]) -> None:
    """Queue the Celery task that runs the series' pending runs (interleaved for a pair)."""
    _enqueue(series)


def _enqueue(series: list[RunSeries]) -> None:
    runs = BenchmarkRun.objects.filter(series__in=series, status=RunStatus.PENDING)
    limit = sum(services.time_limit_s(r.workload) for r in runs)
    task_id = series[0].celery_task_id
    services.enqueue("bench.run_series", ([s.pk for s in series],), task_id, limit)


def create_series(
    template: BenchmarkRun,
    repeats: int,
    user: Any = None,
    request: HttpRequest | None = None,
    enqueue: bool = True,
) -> RunSeries:
    """N more runs like `template`, one after another on its target."""
    repeats = check_repeats(repeats)
    with transaction.atomic():
        series = _new_series(template, repeats, Side.A, user)
        for _ in range(repeats):
            copy_run(template, series, user, request)
        series.celery_task_id = services.new_task_id()
        series.save(update_fields=["celery_task_id"])
        record(
            action=Action.RUN,
            obj=series,
            user=user,
            request=request,
            message=f"{repeats} repeats of benchmark #{template.pk}",
        )
        if enqueue:
            transaction.on_commit(lambda: _enqueue([series]))
    return series


def pair_refusal(a: BenchmarkRun, b: BenchmarkRun) -> str:
    """Why the two runs cannot be repeated as an interleaved pair ("" when they can): on one
    endpoint with different node configuration, both repeats would measure today's."""
    if a.endpoint_id != b.endpoint_id:
        return ""
    changed = [r["path"] for r in config_diff(a, b) if r["path"].startswith("node")]
    if not changed:
        return ""
    return (
        f"runs #{a.pk} and #{b.pk} used the same endpoint with different node configuration "
        f"({', '.join(changed[:3])}); repeating both now would measure today's configuration "
        "twice. Repeat each run while its configuration is applied, then compare the two series."
    )


def create_pair(
    a: BenchmarkRun,
    b: BenchmarkRun,
    repeats: int,
    user: Any = None,
    request: HttpRequest | None = None,
    enqueue: bool = True,
) -> tuple[RunSeries, RunSeries]:
    """N runs like `a` and N like `b`, interleaved A B A B on their targets."""
    repeats = check_repeats(repeats)
    refusal = pair_refusal(a, b)
    if refusal:
        raise services.RunError("b", refusal)
    with transaction.atomic():
        label = f"pair #{a.pk} vs #{b.pk}"
        series_a = _new_series(a, repeats, Side.A, user, f"{label}: side A")
        series_b = _new_series(b, repeats, Side.B, user, f"{label}: side B")
        series_a.partner, series_b.partner = series_b, series_a
        series_a.celery_task_id = series_b.celery_task_id = services.new_task_id()
        series_a.save(update_fields=["partner", "celery_task_id"])
        series_b.save(update_fields=["partner", "celery_task_id"])
        for _ in range(repeats):  # made, and so run, in this order: A B A B ...
            copy_run(a, series_a, user, request)
            copy_run(b, series_b, user, request)
        record(
            action=Action.RUN,
            obj=series_a,
            user=user,
            request=request,
            message=f"{repeats} interleaved repeats of benchmarks #{a.pk} and #{b.pk}",
        )
        if enqueue:
            transaction.on_commit(lambda: _enqueue([series_a, series_b]))
    return series_a, series_b


def request_cancel_series(
    series: RunSeries, user: Any = None, request: HttpRequest | None = None
) -> RunSeries:
    """Stop a series (and its partner): pending runs are cancelled, the running one is asked
    to stop and keeps what it measured."""
    group = [series.pk] + ([series.partner_id] if series.partner_id else [])
    with transaction.atomic():
        RunSeries.objects.filter(pk__in=group).update(cancel_requested=True)
        BenchmarkRun.objects.filter(series_id__in=group, status=RunStatus.PENDING).update(
            status=RunStatus.CANCELLED,
            status_reason="series cancelled before this run started",
            cancel_requested=True,
            finished_at=timezone.now(),
        )
        for run in BenchmarkRun.objects.filter(series_id__in=group, status=RunStatus.RUNNING):
            services.request_cancel(run, user, request)
        record(action=Action.CANCEL, obj=series, user=user, request=request, message="cancel")
    series.refresh_from_db()
    return series
