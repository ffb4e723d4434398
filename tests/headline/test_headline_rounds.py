"""`python -m perf.headline --rounds N` (perf/headline/rounds.py): paired rounds of the arms and
a verdict over them that includes run-to-run noise.

The verdict is pure and checked on drawn data: two arms from one distribution (A/A) get no
verdict, an arm with twice the tail is resolved worse, and a throughput loss misses the target
whatever the tail. One short real run on the simulator checks the rounds themselves: a seed per
round, the order reversed on even rounds, the rate of round 1 kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perf.headline.__main__ import main
from perf.headline.rounds import (
    MAX_CLIENT_STALL_S,
    judge,
    render_steady,
    round_arms,
    rounds_record,
    steady_rounds,
)


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


@pytest.mark.slow
def test_two_rounds_on_the_simulator(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rounds.json"
    argv = ["--rounds", "2", "--arms", "ab", "--reference", "b", "--no-search", "--rate", "12",
            "--duration", "3", "--warmup", "1", "--seed", "4", "--workdir", str(tmp_path / "w"),
            "--json", str(out)]  # fmt: skip
    assert main(argv) == 0
    record = json.loads(out.read_text())
    docs = record["docs"]
    assert [d["workload"]["seed"] for d in docs] == [4, 5]
    assert [[a["key"] for a in d["arms"]] for d in docs] == [["a", "b"], ["b", "a"]]
    assert {d["workload"]["rate_rps"] for d in docs} == {12.0}
    assert record["round_workdirs"] == [str(tmp_path / "w" / f"round-{i}") for i in (1, 2)]
    verdict = record["judgement"]["a"]
    assert verdict["rounds"] == 2 and verdict["p99_unpaired"]["runs_a"] == 2
    assert all(r["p99_ratio"] > 0 for r in verdict["per_round"])
    assert "arm (a), 2 rounds" in capsys.readouterr().out
    # Each arm's client stall is recorded, and the steady rounds are named.
    assert all(r[k]["client_stall_s"] is not None for r in record["records"] for k in "ab")
    assert record["steady"]["max_client_stall_s"] == MAX_CLIENT_STALL_S
    assert set(record["steady"]["rounds"]) <= {1, 2}
    again = judge(record["records"], "a")["b"]  # the other way round, from the record alone
    assert again["rounds"] == 2 and again["p99_unpaired"]["runs_b"] == 2
