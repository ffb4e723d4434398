"""Repeats until decided (console/bench/adaptive.py): one click on an undecided comparison
queues the runs the power calculation asks for as an interleaved pair; after each round the
decision is read again and another round follows until it is made or the budget is spent.
The rounds' runs are filled in here as a worker would leave them (the Celery task's own path,
execute_series, is covered by tests/bench/test_repeats.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from console.bench import adaptive, repeats, services, sides
from console.bench.models import BenchmarkRun, RunSeries
from tests.bench.decision_data import BEFORE, fill_run, new_run

FASTER = {**BEFORE, "ttft": {k: v * 0.4 for k, v in BEFORE["ttft"].items()}}


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The series each Celery enqueue would have run."""
    calls: list[list[int]] = []
    monkeypatch.setattr(repeats, "enqueue", lambda series: calls.append([s.pk for s in series]))
    return calls


def _other_endpoint(endpoint: Any) -> Any:
    return type(endpoint).objects.create(
        name="other", base_url="http://127.0.0.1:9/v1", default_model="m1"
    )


def _finish_pending(pair: tuple[RunSeries, RunSeries], specs: tuple[dict[str, Any], ...]) -> None:
    """Every pending run of the pair finished with A's or B's figures."""
    for series, spec in zip(pair, specs, strict=True):
        for i, run in enumerate(series.runs.filter(status="pending").order_by("pk")):
            fill_run(run, **spec, seed=run.pk * 7 + i)


def test_one_click_queues_a_pair_and_rounds_follow_until_decided(
    plain_endpoint: Any,
    operator: Any,
    queued: list[list[int]],
    django_capture_on_commit_callbacks: Any,
) -> None:
    # Two runs that agree: one run a side cannot show it (the noise is assumed), more can.
    a = new_run(plain_endpoint, **BEFORE, seed=1)
    b = new_run(_other_endpoint(plain_endpoint), **BEFORE, seed=1)
    found = sides.resolve_all({"a": str(a.pk), "b": str(b.pk)})
    before = sides.compare_sides(found["a"], found["b"])["decision"]
    assert before["outcome"] == "not enough data" and before["more_runs"]
    with django_capture_on_commit_callbacks(execute=True):
        side_a, side_b = adaptive.start(
            found["a"], found["b"], objective=None, budget_runs=6, budget_minutes=30, user=operator
        )
    first = side_a.runs.count()
    assert first == side_b.runs.count() == min(max(before["more_runs"] + 1, 2), 6)
    assert queued == [[side_a.pk, side_b.pk]]
    side_a.refresh_from_db()
    assert side_a.budget_runs == 6 and side_a.objective == "min_online_ttft_p99"
    assert side_a.adaptive_state.startswith(f"{first} more runs a side queued")

    # A round still running: nothing to do yet.
    assert adaptive.next_round([side_a.pk, side_b.pk]) is False
    # The round measured B faster, with A/A noise otherwise: decided, so no more rounds.
    _finish_pending((side_a, side_b), (BEFORE, FASTER))
    with django_capture_on_commit_callbacks(execute=True):
        assert adaptive.next_round([side_a.pk, side_b.pk]) is False
    side_a.refresh_from_db()
    assert side_a.adaptive_state == f"stopped: decided (better) after {first} runs a side"
    assert side_a.budget_runs is None and len(queued) == 1


def test_an_undecided_round_queues_another_until_the_budget_is_spent(
    plain_endpoint: Any,
    operator: Any,
    queued: list[list[int]],
    django_capture_on_commit_callbacks: Any,
) -> None:
    a = new_run(plain_endpoint, **BEFORE, seed=1)
    b = new_run(_other_endpoint(plain_endpoint), **BEFORE, seed=2)
    side_a, side_b = repeats.create_pair(a, b, 2, operator, enqueue=False)
    RunSeries.objects.filter(pk__in=[side_a.pk, side_b.pk]).update(
        budget_runs=3, deadline="2100-01-01T00:00:00Z"
    )
    # The online tier's TTFT swings 10x between runs: no decision in 2 runs a side.
    swings = iter([0.2, 3.0, 2.5, 0.3, 1.0, 1.0, 1.0, 1.0])
    for run in BenchmarkRun.objects.filter(series__in=[side_a, side_b]).order_by("pk"):
        ttft = {**BEFORE["ttft"], "online": BEFORE["ttft"]["online"] * next(swings)}
        fill_run(run, **{**BEFORE, "ttft": ttft}, seed=run.pk)
    with django_capture_on_commit_callbacks(execute=True):
        assert adaptive.next_round([side_a.pk, side_b.pk]) is True
    assert side_a.runs.count() == side_b.runs.count() == 3  # one more a side: the budget
    assert len(queued) == 1
    side_a.refresh_from_db()
    assert side_a.adaptive_state.startswith("another 1 run(s) a side queued: not enough data")
    last = side_b.runs.order_by("pk").last()
    assert (
        last is not None and last.label == f"side B run 3/3: like #{b.pk} (pair #{a.pk} vs #{b.pk})"
    )
    # That round undecided too: the budget of runs is spent, and the pair says so.
    for run in BenchmarkRun.objects.filter(series__in=[side_a, side_b], status="pending"):
        fill_run(run, **{**BEFORE, "ttft": {**BEFORE["ttft"], "online": 0.3}}, seed=run.pk)
    assert adaptive.next_round([side_a.pk, side_b.pk]) is False
    side_a.refresh_from_db()
    assert side_a.adaptive_state.startswith("stopped: budget of runs spent, still not enough")


def test_what_cannot_be_extended_is_refused_naming_the_field(
    plain_endpoint: Any, operator: Any, queued: list[list[int]]
) -> None:
    a = new_run(plain_endpoint, **BEFORE, seed=1)
    series = repeats.create_series(a, 2, operator, enqueue=False)
    for run in series.runs.all():
        fill_run(run, **BEFORE, seed=run.pk)
    found = sides.resolve_all({"a": str(a.pk), "b": series.ref})
    with pytest.raises(services.RunError) as refused:
        adaptive.start(found["a"], found["b"], objective=None)
    assert refused.value.field == "b" and "two series of a pair" in refused.value.message
    # One endpoint whose node changed between the runs: repeating both would measure today's.
    changed = new_run(plain_endpoint, max_in_flight=12, **BEFORE, seed=5)
    node_sides = sides.resolve_all({"a": str(a.pk), "b": str(changed.pk)})
    assert not adaptive.extendable(node_sides["a"], node_sides["b"])
    with pytest.raises(services.RunError) as same_node:
        adaptive.start(node_sides["a"], node_sides["b"], objective=None)
    assert "measure today's configuration twice" in same_node.value.message
    far = new_run(_other_endpoint(plain_endpoint), **FASTER, seed=3)
    far_side = sides.resolve_all({"a": str(a.pk), "b": str(far.pk)})
    for budget, field in (((0, 30), "budget_runs"), ((3, 0), "budget_minutes")):
        with pytest.raises(services.RunError) as bad:
            adaptive.start(
                far_side["a"], far_side["b"], objective=None,
                budget_runs=budget[0], budget_minutes=budget[1],
            )  # fmt: skip
        assert bad.value.field == field
    assert queued == []


def test_the_page_offers_the_runs_in_one_click(
    plain_endpoint: Any, operator: Any, queued: list[list[int]]
) -> None:
    a = new_run(plain_endpoint, **BEFORE, seed=1)
    b = new_run(_other_endpoint(plain_endpoint), **BEFORE, seed=1)
    client = Client()
    client.force_login(operator)
    html = client.get("/benchmarks/compare/", {"a": a.pk, "b": b.pk}).content.decode()
    assert 'id="decide"' in html and "more a side until decided</button>" in html
    answer = client.post(
        "/benchmarks/compare/decide/",
        {"a": a.pk, "b": b.pk, "budget_runs": "4", "budget_minutes": "10"},
    )
    pair = list(RunSeries.objects.order_by("side"))
    assert answer.status_code == 302 and len(pair) == 2
    assert answer["Location"].startswith(f"/benchmarks/compare/?a={pair[0].ref}&b={pair[1].ref}")
    page = client.get(answer["Location"]).content.decode()
    assert 'id="adaptive-state"' in page and 'id="decide"' not in page  # running already
