"""The sweeps' pure cores: the spec and its errors, the planner (one, grid, coordinate and
its resumption), and scoring (metrics, constraints, objective, Pareto front, best trial)."""

from __future__ import annotations

from typing import Any

import pytest

from console.bench.sweeps.planner import best_assignment, next_trial, planned_count
from console.bench.sweeps.scoring import (
    best_index,
    decode_speed,
    evaluate,
    objective_value,
    pareto_front,
    trial_metrics,
)
from console.bench.sweeps.spec import (
    Constraints,
    SpecError,
    SweepSpec,
    TrialOutcome,
    Variable,
    apply_values,
    check_values,
    parse_spec,
)
from console.tuning.vllm_args import default_args
from scheduler.config import config_to_dict, default_config

WAIT = "scheduler.queues.online.max_waiting_time_ms"
BATCH = "scheduler.queues.online.max_batch_size"
CAP = "scheduler.admission.max_in_flight"


def spec(mode: str, *variables: tuple[str, list[Any]], kind: str = "tier_config") -> SweepSpec:
    return parse_spec(
        {"kind": kind, "mode": mode, "variables": [{"path": p, "values": v} for p, v in variables]}
    )


def run_all(s: SweepSpec, score: Any) -> list[dict[str, Any]]:
    """Drive the planner to the end; score(values) -> (feasible, objective)."""
    done: list[TrialOutcome] = []
    while (values := next_trial(s, done)) is not None:
        assert len(done) <= planned_count(s), "the planner went past its own bound"
        done.append(TrialOutcome(values, *score(values)))
    return [dict(o.values) for o in done]


# --- spec -----------------------------------------------------------------------------------


def test_parse_spec_defaults_to_one_variable_and_the_online_ttft_objective() -> None:
    s = parse_spec({"kind": "tier_config", "variables": [{"path": WAIT, "values": [1, 5]}]})
    assert s.mode == "one" and s.objective == "min_online_ttft_p99"
    assert s.variables == (Variable(WAIT, (1, 5)),)
    assert s.constraints == Constraints()


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"kind": "nope", "variables": []}, "kind", "must be one of"),
        ({"kind": "tier_config", "mode": "zigzag"}, "mode", "must be one of"),
        ({"kind": "tier_config", "objective": "fast"}, "objective", "must be one of"),
        ({"kind": "tier_config", "variables": []}, "variables", "non-empty"),
        (
            {"kind": "tier_config", "variables": [{"path": "queues.online", "values": [1]}]},
            "variables[0].path",
            "under scheduler",
        ),
        (
            {"kind": "launch_profile", "variables": [{"path": "max-num-seqs", "values": [1]}]},
            "variables[0].path",
            "not a launch argument",
        ),
        (
            {"kind": "launch_profile", "variables": [{"path": "model", "values": ["x"]}]},
            "variables[0].path",
            "cannot be swept",
        ),
        (
            {"kind": "tier_config", "variables": [{"path": WAIT, "values": [1, 2, None]}]},
            "variables[0].values[2]",
            "number",
        ),
        (
            {"kind": "tier_config", "variables": [{"path": WAIT, "values": [1, 2, 1]}]},
            "variables[0].values[2]",
            "twice",
        ),
        (
            {"kind": "tier_config", "variables": [{"path": WAIT, "values": [1], "x": 1}]},
            "variables[0].x",
            "not a field",
        ),
        (
            {
                "kind": "tier_config",
                "mode": "coordinate",
                "variables": [{"path": WAIT, "values": [1]}, {"path": WAIT, "values": [2]}],
            },
            "variables[1].path",
            "already swept",
        ),
        (
            {
                "kind": "tier_config",
                "variables": [{"path": WAIT, "values": [1]}, {"path": BATCH, "values": [2]}],
            },
            "variables",
            "grid",
        ),
        (
            {"kind": "tier_config", "mode": "grid", "variables": [{"path": WAIT, "values": [1]}]},
            "variables",
            "2 to 3",
        ),
        (
            {
                "kind": "tier_config",
                "mode": "grid",
                "variables": [
                    {"path": WAIT, "values": [1, 2, 3, 4, 5]},
                    {"path": BATCH, "values": [1, 2, 3, 4, 5]},
                ],
            },
            "variables",
            "25 trials",
        ),
        (
            {
                "kind": "tier_config",
                "variables": [{"path": WAIT, "values": [1]}],
                "constraints": {"max_error_rate": 2},
            },
            "constraints.max_error_rate",
            "between 0 and 1",
        ),
        (
            {
                "kind": "tier_config",
                "variables": [{"path": WAIT, "values": [1]}],
                "constraints": {"max_ttft_p99_ms": {"online": -5}},
            },
            "constraints.max_ttft_p99_ms.online",
            "positive",
        ),
        (
            {
                "kind": "tier_config",
                "variables": [{"path": WAIT, "values": [1]}],
                "constraints": {"min_rps": 1},
            },
            "constraints.min_rps",
            "not a constraint",
        ),
    ],
)
def test_parse_spec_errors_name_the_field(data: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(data)
    assert caught.value.field == field
    assert words in caught.value.message
    assert str(caught.value).startswith(f"{field}: ")


def test_apply_values_sets_paths_on_a_copy_and_validates_the_result() -> None:
    base = config_to_dict(default_config())
    doc = apply_values("tier_config", base, {WAIT: 3, CAP: 16})
    assert doc["scheduler"]["queues"]["online"]["max_waiting_time_ms"] == 3
    assert doc["scheduler"]["admission"] == {"max_in_flight": 16}  # created where absent
    assert base["scheduler"]["queues"]["online"]["max_waiting_time_ms"] == 10  # untouched
    args = apply_values("launch_profile", default_args(), {"max_num_seqs": 64})
    assert args["max_num_seqs"] == 64 and default_args()["max_num_seqs"] == 32


def test_apply_values_refuses_an_invalid_tier_config_or_launch_args() -> None:
    base = config_to_dict(default_config())
    with pytest.raises(SpecError) as caught:
        apply_values("tier_config", base, {WAIT: 0})
    assert caught.value.field == WAIT and "> 0" in caught.value.message
    with pytest.raises(SpecError) as caught:
        apply_values("tier_config", base, {"scheduler.queues.online.speed": 1})
    assert caught.value.field == "scheduler.queues.online.speed"
    with pytest.raises(SpecError) as caught:
        # vLLM refuses fewer batched tokens than sequences.
        apply_values("launch_profile", default_args(), {"max_num_seqs": 20000})
    assert caught.value.field == "max_num_batched_tokens"
    with pytest.raises(SpecError) as caught:
        apply_values("launch_profile", default_args(), {"max_num_seqs": "many"})
    assert caught.value.field == "max_num_seqs"


def test_check_values_names_the_value_its_trial_would_fail_on() -> None:
    base = config_to_dict(default_config())
    with pytest.raises(SpecError) as caught:
        check_values(spec("one", (WAIT, [1, 5, -1])), base)
    assert caught.value.field == "variables[0].values[2]"
    assert WAIT in caught.value.message
    with pytest.raises(SpecError) as caught:
        check_values(spec("one", ("max_num_seqs", [16, 0]), kind="launch_profile"), default_args())
    assert caught.value.field == "variables[0].values[1]"
    check_values(spec("grid", (WAIT, [1, 5]), (BATCH, [4, 8])), base)  # all fine: no error


# --- planner --------------------------------------------------------------------------------


def test_one_variable_measures_the_base_first_then_each_value() -> None:
    s = spec("one", (WAIT, [1, 5, 20]))
    assert planned_count(s) == 4
    assert run_all(s, lambda v: (True, 1.0)) == [{}, {WAIT: 1}, {WAIT: 5}, {WAIT: 20}]


def test_grid_measures_the_base_then_the_product_in_order() -> None:
    s = spec("grid", (WAIT, [1, 5]), (BATCH, [4, 8, 16]))
    assert planned_count(s) == 7
    order = run_all(s, lambda v: (True, 1.0))
    assert order[0] == {} and len(order) == 7
    assert order[1:] == [{WAIT: w, BATCH: b} for w in (1, 5) for b in (4, 8, 16)]


def test_coordinate_keeps_the_best_feasible_value_of_each_variable_before_the_next() -> None:
    s = spec("coordinate", (WAIT, [1, 5, 20]), (BATCH, [4, 16]))
    # Lower is better. WAIT=1 would be best but is infeasible; WAIT=5 is the best feasible.
    objective = {1: 10.0, 5: 50.0, 20: 80.0}

    def score(values: dict[str, Any]) -> tuple[bool, float]:
        wait = values.get(WAIT)
        batch_bonus = {4: -30.0, 16: +5.0}.get(values.get(BATCH, 0), 0.0)
        return (wait != 1, objective.get(wait, 100.0) + batch_bonus)

    order = run_all(s, score)
    assert order == [
        {},
        {WAIT: 1},
        {WAIT: 5},
        {WAIT: 20},
        {WAIT: 5, BATCH: 4},  # the next variable on top of the best feasible WAIT
        {WAIT: 5, BATCH: 16},
    ]
    assert planned_count(s) == len(order)


def test_coordinate_keeps_the_base_value_when_no_value_beats_it() -> None:
    s = spec("coordinate", (WAIT, [1, 5]), (BATCH, [4]))
    order = run_all(s, lambda v: (True, 10.0 if not v else 20.0))
    assert order[-1] == {BATCH: 4}  # WAIT kept at the base's own value


def test_coordinate_resumes_after_a_restart_by_recomputing_from_stored_outcomes() -> None:
    s = spec("coordinate", (WAIT, [1, 5]), (BATCH, [4, 16]))
    stored = [
        TrialOutcome({}, True, 30.0),
        TrialOutcome({WAIT: 1}, False, 5.0),  # infeasible: never the best
        TrialOutcome({WAIT: 5}, True, 20.0),
    ]
    # A fresh planner call (as after a worker restart) sees the same next trial, whichever
    # order the rows come back in.
    assert next_trial(s, stored) == {WAIT: 5, BATCH: 4}
    assert next_trial(s, list(reversed(stored))) == {WAIT: 5, BATCH: 4}
    assert best_assignment(s, stored) == {WAIT: 5}
    stored += [TrialOutcome({WAIT: 5, BATCH: 4}, True, 25.0)]
    assert next_trial(s, stored) == {WAIT: 5, BATCH: 16}
    stored += [TrialOutcome({WAIT: 5, BATCH: 16}, True, 15.0)]
    assert next_trial(s, stored) is None
    assert best_assignment(s, stored) == {WAIT: 5, BATCH: 16}


def test_a_failed_base_does_not_stop_the_descent_and_the_first_feasible_value_wins() -> None:
    s = spec("coordinate", (WAIT, [1, 5]))
    stored = [TrialOutcome({}, False, None), TrialOutcome({WAIT: 1}, True, 40.0)]
    assert next_trial(s, stored) == {WAIT: 5}
    assert best_assignment(s, stored) == {WAIT: 1}


def test_resuming_a_fixed_plan_skips_what_is_stored() -> None:
    s = spec("one", (WAIT, [1, 5]))
    assert next_trial(s, []) == {}
    assert next_trial(s, [TrialOutcome({}, True, 1.0)]) == {WAIT: 1}
    done = [TrialOutcome(v, False, None) for v in ({}, {WAIT: 1}, {WAIT: 5})]
    assert next_trial(s, done) is None


# --- scoring --------------------------------------------------------------------------------


def summary(rps: float, tps: float, errors: float, p99: dict[str, float], n: int) -> Any:
    tiers: dict[str, Any] = {
        tier: {"ttft_s": {"p99": ms / 1000, "p50": ms / 2000}} for tier, ms in p99.items()
    }
    tiers["overall"] = {
        "ttft_s": {"p99": max(p99.values()) / 1000, "p50": 0.01},
        "request_throughput_rps": rps,
        "output_throughput_tps": tps,
        "error_rate": errors,
        "count": n,
    }
    return tiers


def test_trial_metrics_are_means_over_the_repeats() -> None:
    runs = [
        summary(4.0, 400.0, 0.0, {"online": 100.0, "batch": 900.0}, 40),
        summary(6.0, 600.0, 0.1, {"online": 300.0, "batch": 1100.0}, 60),
    ]
    m = trial_metrics(runs, gpu_count=2, user_speeds=[50.0, 70.0])
    assert m["throughput_rps"] == pytest.approx(5.0)
    assert m["output_tokens_per_s"] == pytest.approx(500.0)
    assert m["tokens_per_s_per_gpu"] == pytest.approx(250.0)
    assert m["tokens_per_s_per_user"] == pytest.approx(60.0)
    assert m["error_rate"] == pytest.approx(0.05)
    assert m["ttft_p99_ms"] == pytest.approx({"online": 200.0, "batch": 1000.0, "overall": 1000.0})
    assert m["ttft_p50_ms"]["online"] == pytest.approx(100.0)
    assert m["requests"] == 100 and m["repeats"] == 2
    assert trial_metrics(runs, gpu_count=0)["tokens_per_s_per_gpu"] == pytest.approx(500.0)


def test_decode_speed_is_output_tokens_over_the_decode_time_per_request() -> None:
    # 99 tokens after the first in 2 s, 49 in 0.5 s: 49.5 and 98 tokens/s; the median of two.
    assert decode_speed([(100, 0.5, 2.5), (50, 0.1, 0.6), (None, 0.1, 1.0)]) == 73.75
    assert decode_speed([(10, 1.0, 1.0)]) is None


def test_evaluate_names_each_constraint_a_trial_breaks() -> None:
    metrics = {"throughput_rps": 3.2, "error_rate": 0.02, "ttft_p99_ms": {"online": 812.0}}
    feasible, violations = evaluate(
        metrics,
        Constraints(
            min_throughput_rps=4, max_error_rate=0.01, max_ttft_p99_ms={"online": 500, "batch": 9}
        ),
    )
    assert not feasible
    assert violations == [
        "throughput 3.2 req/s < floor 4 req/s",
        "error rate 2.0% > max 1.0%",
        "online TTFT P99 812 ms > cap 500 ms",
        "batch TTFT P99 not measured (cap 9 ms)",
    ]
    assert evaluate(metrics, Constraints(max_ttft_p99_ms={"online": 900})) == (True, [])


def test_objective_value_is_lower_for_better() -> None:
    m = {"throughput_rps": 5.0, "output_tokens_per_s": 700.0, "ttft_p99_ms": {"online": 120.0}}
    assert objective_value(m, "min_online_ttft_p99") == 120.0
    assert objective_value(m, "max_throughput") == -5.0
    assert objective_value(m, "max_output_tokens_per_s") == -700.0
    assert objective_value({"ttft_p99_ms": {}}, "min_online_ttft_p99") is None


def test_pareto_front_keeps_the_points_nothing_dominates() -> None:
    # (TTFT P99 ms: minimise, throughput rps: maximise)
    points = [(100.0, 5.0), (200.0, 8.0), (150.0, 4.0), (300.0, 8.0), (90.0, 3.0), (100.0, 5.0)]
    assert pareto_front(points, (True, False)) == [0, 1, 4, 5]
    assert pareto_front(points, (False, False)) == [3]
    assert pareto_front([], (True, True)) == []


def test_best_index_is_the_best_feasible_trial_or_none() -> None:
    outcomes = [
        TrialOutcome({}, True, 30.0),
        TrialOutcome({WAIT: 1}, False, 5.0),
        TrialOutcome({WAIT: 5}, True, 20.0),
        TrialOutcome({WAIT: 9}, True, None),
    ]
    assert best_index(outcomes) == 2
    assert best_index([TrialOutcome({}, True, 7.0), TrialOutcome({WAIT: 1}, True, 7.0)]) == 0
    assert best_index([TrialOutcome({}, False, 1.0)]) is None
