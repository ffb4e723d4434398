"""Repeats until decided: the compare page's one click when its decision says "not enough data:
about N more runs a side would decide".

    start(a, b, objective, budget_runs, budget_minutes, user, request) -> (series A, series B)
    next_round(series_ids) -> bool      # the run_series task's last step

It reuses the repeats' machinery (repeats.py): two runs become an interleaved pair of series
(create_pair, with its refusal of a node changed between the runs), a pair of series gets more
runs like its templates; the Celery task run_series runs them A B A B. When a round is done,
next_round reads the decision again (sides.compare_sides, the pair's declared objective) and
queues another round of the runs the power calculation asks for, until the decision is made
or the budget (runs a side, minutes from the click) is spent; the reason it stopped is kept on
both series (adaptive_state) and shown on the compare page.

The decision is looked at after each round, not only at the end: each look uses the same
level, so stopping at the first decided look errs somewhat more often than one fixed-size
test would (docs/benchmarks.md, "Until decided").
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Avg, F
from django.http import HttpRequest
from django.utils import timezone

from console.audit.choices import Action
from console.audit.services import record
from console.bench import repeats, services, sides
from console.bench.choices import FINISHED, Verdict
from console.bench.figures import objective_of
from console.bench.models import BenchmarkRun, RunSeries

DEFAULT_BUDGET_RUNS = 10
DEFAULT_BUDGET_MINUTES = 30
MAX_BUDGET_MINUTES = 24 * 60


def check_budget(runs: Any, minutes: Any) -> tuple[int, int]:
    """(runs a side, minutes), each checked like the repeats' count; a RunError names the
    field."""
    runs = repeats.check_repeats(runs, "budget_runs")
    if isinstance(minutes, bool) or not isinstance(minutes, int):
        raise services.RunError("budget_minutes", "must be an integer")
    if not 1 <= minutes <= MAX_BUDGET_MINUTES:
        raise services.RunError("budget_minutes", f"must be between 1 and {MAX_BUDGET_MINUTES}")
    return runs, minutes


def pair_of(a: sides.Side, b: sides.Side) -> tuple[RunSeries, RunSeries] | None:
    """The two sides as a pair of partner series, or None."""
    sa, sb = a.series, b.series
    if sa is not None and sb is not None and sa.partner_id == sb.pk:
        return sa, sb
    return None


def extendable(a: sides.Side, b: sides.Side) -> bool:
    """Whether one click can add runs to these sides: two runs, or a pair of series (whose
    template runs are still there to copy)."""
    if a.series is None and b.series is None:
        runs = len(a.runs) == len(b.runs) == 1
        return runs and not repeats.pair_refusal(a.runs[0], b.runs[0])
    pair = pair_of(a, b)
    return pair is not None and all(s.template_id is not None for s in pair)


def _round_size(decision: dict[str, Any], runs_made: int, budget: int) -> int:
    """The runs a side the next round adds: what the power calculation asks for (the whole
    budget when it asks for more than MAX_RUNS), within the budget."""
    wanted = decision["more_runs"] if decision["more_runs"] is not None else budget
    return max(min(wanted, budget - runs_made), 0)


def _mark(series: list[RunSeries], **fields: Any) -> None:
    RunSeries.objects.filter(pk__in=[s.pk for s in series]).update(**fields)


def _requeue(pair: list[RunSeries]) -> None:
    """Queue the pair's pending runs once this transaction commits, under a new task id."""
    _mark(pair, celery_task_id=services.new_task_id())
    fresh = list(RunSeries.objects.filter(pk__in=[s.pk for s in pair]).order_by("side"))
    transaction.on_commit(lambda: repeats.enqueue(fresh))


def _extend(pair: tuple[RunSeries, RunSeries], count: int, user: Any, request: Any) -> None:
    """`count` more runs a side like each series' template, made A B A B."""
    for series in pair:
        RunSeries.objects.filter(pk=series.pk).update(repeats=F("repeats") + count)
        series.refresh_from_db()
    for _ in range(count):
        for series in pair:
            assert series.template is not None
            repeats.copy_run(series.template, series, user, request)


def start(
    a: sides.Side,
    b: sides.Side,
    *,
    objective: str | None,
    budget_runs: int = DEFAULT_BUDGET_RUNS,
    budget_minutes: int = DEFAULT_BUDGET_MINUTES,
    user: Any = None,
    request: HttpRequest | None = None,
) -> tuple[RunSeries, RunSeries]:
    """The first round of runs, queued; later rounds follow from next_round."""
    budget_runs, budget_minutes = check_budget(budget_runs, budget_minutes)
    objective = objective_of(objective)
    if not extendable(a, b):
        both = a.series is None and b.series is None and len(a.runs) == len(b.runs) == 1
        raise services.RunError(
            "b",
            repeats.pair_refusal(a.runs[0], b.runs[0])
            if both
            else "adding runs needs two runs, or the two series of a pair: repeat each side "
            "while its configuration is applied, then compare the two series",
        )
    decision = sides.compare_sides(a, b, objective=objective)["decision"]
    if decision["outcome"] != Verdict.NOT_ENOUGH_DATA:
        raise services.RunError("b", f"already decided: {decision['headline']}")
    pair = pair_of(a, b)
    if pair is None:  # two runs: a new pair of series holds as many as the decision needs
        first = min(max((decision["more_runs"] or budget_runs) + 1, 2), budget_runs)
    else:
        first = _round_size(decision, min(s.runs.count() for s in pair), budget_runs)
        if first < 1:
            raise services.RunError(
                "budget_runs", f"the pair already has {budget_runs} runs a side"
            )
    deadline = timezone.now() + timedelta(minutes=budget_minutes)
    fields = {"objective": objective, "budget_runs": budget_runs, "deadline": deadline}
    with transaction.atomic():
        if pair is None:
            pair = repeats.create_pair(a.runs[0], b.runs[0], first, user, request, False)
        else:
            _extend(pair, first, user, request)
        state = f"{first} more run{'' if first == 1 else 's'} a side queued: {decision['headline']}"
        _mark(list(pair), adaptive_state=state[:300], cancel_requested=False, **fields)
        record(
            action=Action.RUN,
            obj=pair[0],
            user=user,
            request=request,
            message=f"repeats until decided (at most {budget_runs} runs a side, "
            f"{budget_minutes} min): {first} run(s) a side first",
        )
        _requeue(list(pair))
    return pair


def _mean_run_s(pair: list[RunSeries]) -> float | None:
    took = (
        BenchmarkRun.objects.filter(
            series__in=pair, started_at__isnull=False, finished_at__isnull=False
        )
        .annotate(took=F("finished_at") - F("started_at"))
        .aggregate(mean=Avg("took"))["mean"]
    )
    return took.total_seconds() if took is not None else None


def next_round(series_ids: list[int]) -> bool:
    """After a round: decided, out of budget, cancelled, or another round queued (True)."""
    with transaction.atomic():
        pair = list(
            RunSeries.objects.select_for_update().filter(pk__in=series_ids).order_by("side")
        )
        if len(pair) != 2 or pair[0].budget_runs is None or pair[0].deadline is None:
            return False
        runs = BenchmarkRun.objects.filter(series__in=pair)
        if runs.exclude(status__in=FINISHED).exists():
            return False  # a round still under way: its own task ends it
        if any(s.cancel_requested for s in pair):
            _mark(pair, adaptive_state="stopped: cancelled", budget_runs=None)
            return False
        a, b = (sides.resolve(name, s.ref) for name, s in zip("ab", pair, strict=True))
        decision = sides.compare_sides(a, b, objective=pair[0].objective or None)["decision"]
        done = min(len(a.runs), len(b.runs))
        made = min(s.runs.count() for s in pair)
        if decision["outcome"] != Verdict.NOT_ENOUGH_DATA:
            state = f"stopped: decided ({decision['outcome']}) after {done} runs a side"
            _mark(pair, adaptive_state=state, budget_runs=None)
            return False
        size = _round_size(decision, made, pair[0].budget_runs)
        left_s = (pair[0].deadline - timezone.now()).total_seconds()
        per_run = _mean_run_s(pair)
        if per_run:
            size = min(size, math.floor(left_s / (2 * per_run)))
        if size < 1 or left_s <= 0:
            spent = "runs" if made >= pair[0].budget_runs else "minutes"
            state = f"stopped: budget of {spent} spent, still {decision['headline']}"
            _mark(pair, adaptive_state=state[:300], budget_runs=None)
            return False
        _extend((pair[0], pair[1]), size, pair[0].created_by, None)
        state = f"another {size} run(s) a side queued: {decision['headline']}"
        _mark(pair, adaptive_state=state[:300])
        _requeue(pair)
    return True
