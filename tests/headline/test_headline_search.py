"""The headline's tier-config search is the sweeps' coordinate descent (planner + scoring): a
scripted set of figures per trial, and which values the descent keeps and refuses, worked out
by hand; then one real trial pair through an engine and a gateway."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from console.bench.headline.arms import Setup
from console.bench.headline.search import (
    acceptance,
    candidate_axes,
    descend,
    search_tier_config,
    spec_of,
)
from console.bench.headline.workload import SEED_TIER_CONFIG, records_needed, write_prompts
from console.bench.sweeps import planner
from console.bench.sweeps.choices import SweepMode

# online / batch / offline TTFT P99 (ms), done/s in window, errors; by the value a trial adds.
FIGURES: dict[str, tuple[float, float, float, float, int]] = {
    "seed 000 config": (500, 1000, 4000, 24.5, 0),
    "max_awaiting_first_token=1": (300, 1000, 4000, 24.5, 0),  # better: kept
    "max_awaiting_first_token=2": (400, 1000, 4000, 25.0, 0),  # worse; raises the top rate
    "max_awaiting_first_token=8": (250, 1000, 4000, 24.5, 3),  # better, but failures
    "max_in_flight=32": (280, 1000, 4000, 24.5, 0),  # better: kept
    "max_in_flight=24": (200, 1000, 7000, 24.5, 0),  # offline past 1.5 x 4000
    "reserved_slots=4": (150, 1000, 4000, 24.0, 0),  # under 0.97 x 25.0 = 24.25 done/s
    "reserved_slots=8": (260, 1400, 4000, 24.5, 0),  # better, batch within 1.5 x: kept
    "waits=2/10/50 ms": (290, 1000, 4000, 24.5, 0),  # worse than 260
    "waits=1/1/1 ms": (255, 1000, 4000, 24.5, 0),  # better: kept
}


def test_the_descent_keeps_what_the_hand_calculation_keeps() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    def measure(index: int, label: str, cfg: dict[str, Any]) -> dict[str, Any]:
        key = label.split(" (on:")[0]
        seen.append((key, cfg))
        online, batch, offline, rps, errors = FIGURES[key]
        return {
            "ttft_p99_ms": {"online": online, "batch": batch, "offline": offline},
            "throughput_rps": rps,
            "error_rate": errors / 100,
            "rejected_or_failed": errors,
        }

    found = descend(candidate_axes(), measure, log=lambda _m: None)

    assert [k for k, _ in seen] == list(FIGURES)  # one variable at a time, in order
    by_key = {k: t for (k, _), t in zip(seen, found["trials"], strict=True)}
    assert [k for k, t in by_key.items() if t["accepted"]] == [
        "seed 000 config", "max_awaiting_first_token=1", "max_awaiting_first_token=2",
        "max_in_flight=32", "reserved_slots=8", "waits=2/10/50 ms", "waits=1/1/1 ms",
    ]  # fmt: skip
    assert "error rate" in by_key["max_awaiting_first_token=8"]["violations"][0]
    assert by_key["max_in_flight=24"]["violations"] == ["offline TTFT P99 7000 ms > cap 6000 ms"]
    assert by_key["reserved_slots=4"]["violations"][0].startswith("throughput 24 req/s < floor")
    assert found["best_path"] == [
        "seed 000 config", "max_awaiting_first_token=1", "max_in_flight=32",
        "reserved_slots=8", "waits=1/1/1 ms",
    ]  # fmt: skip
    # Each trial ran on top of what was kept before it.
    cfg = dict(seen)["reserved_slots=4"]
    assert cfg["scheduler"]["admission"] == {
        "max_awaiting_first_token": 1, "max_in_flight": 32, "reserved_slots": 4,
    }  # fmt: skip
    best = found["best_config"]
    assert best["scheduler"]["admission"]["reserved_slots"] == 8
    assert best["scheduler"]["queues"]["online"]["max_waiting_time_ms"] == 1
    assert found["best_trial"]["label"].startswith("waits=1/1/1 ms")
    assert found["planner"]["mode"] == SweepMode.COORDINATE


def test_the_axes_are_a_coordinate_spec_and_the_rule_its_constraints() -> None:
    spec = spec_of(candidate_axes())
    assert spec.mode == SweepMode.COORDINATE
    assert planner.planned_count(spec) == 1 + 3 + 2 + 2 + 2
    seed = {"ttft_p99_ms": {"online": 100.0, "batch": 400.0, "offline": None}}
    rule = acceptance(seed, top_rps=20.0)
    assert rule.min_throughput_rps == pytest.approx(19.4)
    assert rule.max_error_rate == 0.0
    assert dict(rule.max_ttft_p99_ms) == {"batch": 600.0}  # no cap on a tier not measured


@pytest.mark.slow
def test_a_one_value_search_runs_through_a_gateway(tmp_path: Path) -> None:
    rate, duration, warmup = 12.0, 2.0, 0.5
    prompts = write_prompts(tmp_path / "p.jsonl", records_needed(rate, duration + warmup), 4)
    setup = Setup(rate, duration, warmup, 4, 1.0, prompts, tmp_path)
    waits = dict(candidate_axes())["waits"]
    found = search_tier_config(
        setup, policy="priority", trial_s=duration, log=lambda _m: None,
        axes=[("waits", [waits[1]])],
    )  # fmt: skip
    seed, trial = found["trials"]
    assert seed["config"] == SEED_TIER_CONFIG and seed["accepted"]
    assert trial["values"] == {"waits": "1/1/1 ms"}
    assert trial["config"]["scheduler"]["queues"]["offline"]["max_waiting_time_ms"] == 1
    for t in (seed, trial):
        assert t["rejected_or_failed"] == 0 and t["done_in_window_rps"] > 0
        assert t["metrics"]["requests"] > 0 and t["online_ttft_p99_ms"] > 0
    assert found["best_config"] in (seed["config"], trial["config"])
