"""`python -m lab.headline --rounds N` (lab/headline/rounds.py): paired rounds of the arms and
a verdict over them that includes run-to-run noise.

The verdict is pure and checked on drawn data: two arms from one distribution (A/A) get no
verdict, an arm with twice the tail is resolved worse, and a throughput loss misses the target
whatever the tail. The rounds themselves (a seed per round, the order reversed on even rounds,
the rate of round 1 kept) are checked around a stand-in for the experiment."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from console.bench.headline.experiment import Experiment, Options
from lab.headline import rounds as rounds_module
from lab.headline.__main__ import main
from lab.headline.arms import lab_arms
from lab.headline.rounds import (
    MAX_CLIENT_STALL_S,
    judge,
    render_steady,
    round_arms,
    rounds_record,
    run_rounds,
    steady_rounds,
)
from loadgen import RequestSample


def _round(rng: np.random.Generator, arms: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """One round: per arm (TTFT scale in s, throughput) -> 400 lognormal TTFTs."""
    return {
        key: {"ttft_s": list(scale * rng.lognormal(0, 0.6, 400)), "throughput_rps": rps}
        for key, (scale, rps) in arms.items()
    }


def test_the_same_arm_twice_is_rarely_called_a_change() -> None:
    """A/A: 200 judgements of four rounds in which both arms draw from one distribution (the
    rounds differ from each other, as runs do). A 95% interval may exclude x1 in about 5%."""
    rng = np.random.default_rng(5)
    results = [
        judge([_round(rng, {"b": (s, 10.0), "d": (s, 10.0)}) for s in (0.2, 0.3, 0.25, 0.22)])
        for _ in range(200)
    ]
    assert sum(r["d"]["resolved"] for r in results) <= 16  # 8%
    assert sum(r["d"]["p99_unpaired"]["verdict"] != "no clear change" for r in results) <= 16
    one = results[0]["d"]
    assert one["rounds"] == 4 and len(one["per_round"]) == 4
    assert 0.7 < one["p99_ratio_pooled"] < 1.4 and one["throughput_ratio"] == 1.0


def test_twice_the_tail_is_resolved_worse_and_misses_the_target() -> None:
    rng = np.random.default_rng(6)
    rounds = [_round(rng, {"b": (s, 10.0), "d": (2 * s, 10.0)}) for s in (0.2, 0.3, 0.25)]
    result = judge(rounds, "b")["d"]
    assert result["p99_verdict"] == "worse" and result["resolved"]
    assert result["p99_ratio_interval"][0] > 1.5
    assert not result["meets_target"]
    assert all(r["p99_ratio"] > 1.5 for r in result["per_round"])
    assert 1.6 < result["p99_ratio"] < 2.5


def test_a_lower_tail_meets_the_target_only_with_the_throughput() -> None:
    rng = np.random.default_rng(7)
    good = [_round(rng, {"b": (s, 10.0), "d": (s / 2, 9.7)}) for s in (0.2, 0.3, 0.25)]
    assert judge(good, "b")["d"]["meets_target"]
    slow = [_round(rng, {"b": (s, 10.0), "d": (s / 2, 9.0)}) for s in (0.2, 0.3, 0.25)]
    assert not judge(slow, "b")["d"]["meets_target"]


def test_a_round_with_a_stalled_client_is_judged_apart() -> None:
    """A stall beside one arm (something else took the client's core) can make a round: the
    judgement over the rounds without one is given beside the whole one."""
    rng = np.random.default_rng(7)
    rounds = [_round(rng, {"b": (s, 10.0), "d": (s, 10.0)}) for s in (0.2, 0.3, 0.25, 0.22)]
    for arms in rounds:
        for record in arms.values():
            record["client_stall_s"] = 0.02
    rounds[1]["d"]["client_stall_s"] = MAX_CLIENT_STALL_S * 8  # d's client stalled in round 2
    rounds[3]["b"]["client_stall_s"] = None  # no figure (an older record): counted as steady
    assert steady_rounds(rounds) == [0, 2, 3]
    assert steady_rounds(rounds, max_stall_s=1.0) == [0, 1, 2, 3]
    kept = judge([rounds[i] for i in (0, 2, 3)], "b")
    steady = {"max_client_stall_s": MAX_CLIENT_STALL_S, "rounds": [1, 3, 4], "judgement": kept}
    text = render_steady(steady, 4, "b")
    assert "the 3 rounds whose client never stalled over 100 ms (left out: round 2)" in text
    assert "arm (d), 3 rounds" in text
    assert render_steady({**steady, "judgement": None}, 4, "b") == ""


def test_the_record_of_the_rounds_done_so_far_judges_from_two() -> None:
    """What `--json` holds after each round (rounds_record): one round is kept without a
    verdict, two get one, and the planned count rides beside the count done."""
    rng = np.random.default_rng(9)
    rounds = [_round(rng, {"b": (0.2, 10.0), "d": (0.2, 10.0)}) for _ in range(2)]
    docs = [{"workdir": f"w/round-{i}"} for i in (1, 2)]
    one = rounds_record(docs[:1], rounds[:1], "b", 12.0, 5)
    assert (one["rounds"], one["rounds_planned"], one["judgement"]) == (1, 5, {})
    assert one["records"] == rounds[:1] and one["round_workdirs"] == ["w/round-1"]
    two = rounds_record(docs, rounds, "b", 12.0, 5)
    assert two["rounds"] == 2 and two["judgement"]["d"]["rounds"] == 2
    assert two["steady"]["rounds"] == [1, 2] and two["rate_rps"] == 12.0


def test_a_json_path_without_its_folder_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-folder" / "rounds.json"
    with pytest.raises(SystemExit) as exit_info:
        main(["--rounds", "2", "--arms", "ab", "--no-search", "--rate", "5",
              "--json", str(missing)])  # fmt: skip
    assert exit_info.value.code == 2
    assert f"--json {missing}: no folder {missing.parent}" in capsys.readouterr().err


def test_even_rounds_run_the_arms_in_reverse() -> None:
    assert [round_arms("bdh", i) for i in range(3)] == ["bdh", "hdb", "bdh"]


def test_the_reference_must_be_one_of_the_arms() -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--rounds", "2", "--arms", "ad", "--no-search", "--rate", "5"])
    assert exit_info.value.code == 2


class _Outcome:
    """What round_record reads of an arm's outcome: its requests, throughput and stall."""

    def __init__(self, key: str, ttft_s: float) -> None:
        self.arm = SimpleNamespace(key=key)
        samples = [
            RequestSample(index=i, send_time=float(i), tier="online", ttft=ttft_s * (1 + i % 7),
                          e2e=1.0, output_tokens=8, status=200)
            for i in range(50)
        ]  # fmt: skip
        self.result = SimpleNamespace(samples=samples, validity={"dispatch_lag_max_s": 0.01})

    def tier_row(self, tier: str) -> dict[str, float]:
        return {"request_throughput_rps": 10.0}


def test_rounds_pair_the_arms_by_seed_order_and_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Round i replays seed + i, even rounds reverse the arms, the rate round 1 found is kept,
    each round has its folder, the lab's arms reach every round, and the record after each
    round holds the rounds done so far."""
    seen: list[tuple[Options, Any]] = []

    def fake(opts: Options, log: Any = None, catalog: Any = None) -> Experiment:
        seen.append((opts, catalog))
        rate = opts.rate or 13.5  # round 1 "finds" the rate
        doc = {"workload": {"seed": opts.seed, "rate_rps": rate}, "workdir": str(opts.workdir)}
        outcomes = [_Outcome(k, 0.1 if k == "b" else 0.2) for k in opts.arms]
        return Experiment(doc, outcomes)  # type: ignore[arg-type]

    monkeypatch.setattr(rounds_module, "run_experiment", fake)
    catalog = lab_arms()
    so_far: list[int] = []
    record = run_rounds(
        Options(arms="ab", seed=4, workdir=tmp_path), 3, "b", log=lambda m: None,
        on_round=lambda r: so_far.append(r["rounds"]), catalog=catalog,
    )  # fmt: skip
    assert [(o.seed, o.arms, o.rate) for o, _ in seen] == [
        (4, "ab", None), (5, "ba", 13.5), (6, "ab", 13.5)]  # fmt: skip
    assert all(c is catalog for _, c in seen)
    assert record["round_workdirs"] == [str(tmp_path / f"round-{i}") for i in (1, 2, 3)]
    assert so_far == [1, 2, 3] and record["rate_rps"] == 13.5
    verdict = record["judgement"]["a"]
    assert verdict["rounds"] == 3 and verdict["p99_ratio"] == pytest.approx(2.0)
    assert verdict["p99_verdict"] == "worse"
