"""lab.headline.tail: where an arm's online P99 came from, read from a round's raw runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.headline import tail
from loadgen.types import RequestSample, RunResult

T0 = 1_800_000_000.0


def _req(i: int, sent: float, tier: str, ttft: float, e2e: float, warmup: bool = False):
    return RequestSample(index=i, send_time=T0 + sent, tier=tier, ttft=ttft, e2e=e2e, warmup=warmup)


def _round(slow_at: float, slow_ttft: float) -> list[RequestSample]:
    """200 online requests 0.1 s apart at 20 ms, three slow ones sent at `slow_at`, and one
    long offline request running across them; one slower warm-up request the P99 ignores."""
    samples = [_req(0, 0.0, "online", 5.0, 6.0, warmup=True)]
    for i in range(1, 201):
        sent = 1.0 + i * 0.1
        slow = abs(sent - slow_at) < 0.25
        ttft = slow_ttft if slow else 0.020
        samples.append(_req(i, sent, "online", ttft, ttft + 0.3))
    samples.append(_req(500, slow_at - 1.0, "offline", 0.1, 3.0))
    return samples


def test_tail_is_the_requests_at_or_above_the_nearest_rank_p99() -> None:
    samples = _round(slow_at=10.0, slow_ttft=0.5)
    p99, slow = tail.tail_of(samples, "online")
    # 200 measured online requests: P99 is rank 198, the 3rd slowest; the warm-up is left out.
    assert p99 == pytest.approx(0.5)
    assert [s.ttft for s in slow] == [0.5] * 5
    assert all(not s.warmup for s in slow)


def test_episodes_join_times_under_the_gap() -> None:
    assert tail.episodes([5.0, 1.0, 1.5, 9.0, 9.9]) == [(1.0, 1.5), (5.0, 5.0), (9.0, 9.9)]
    assert tail.episodes([]) == []


def test_running_at_counts_from_first_token_to_end() -> None:
    samples = [_req(1, 0.0, "offline", 1.0, 5.0), _req(2, 0.0, "online", 0.5, 1.0)]
    assert tail.running_at(samples, T0 + 0.7) == {"online": 1}
    assert tail.running_at(samples, T0 + 2.0) == {"offline": 1}
    assert tail.running_at(samples, T0 + 5.0) == {}


def test_arm_tail_pairs_the_same_requests_in_the_reference() -> None:
    ours = _round(slow_at=10.0, slow_ttft=0.5)
    ref = _round(slow_at=10.0, slow_ttft=0.2)
    window = (T0 + 1.0, T0 + 21.0)
    out = tail.arm_tail(ours, window, "online", ["offline", "online"], ref)
    assert out["p99_ms"] == pytest.approx(500)
    assert out["reference_p99_ms"] == pytest.approx(200)
    assert out["paired_diff_ms"] == pytest.approx(300)
    assert len(out["episodes_s"]) == 1  # one bad moment set the P99
    # The offline request ran across the tail's arrivals, and a small part of the window.
    assert out["running_at_tail"]["offline"] == 1.0
    assert out["running_mean"]["offline"] < 0.2


def test_main_reads_round_folders_and_writes_json(tmp_path: Path, capsys) -> None:
    window = [T0 + 1.0, T0 + 21.0]
    for n, slow_ttft in ((1, 0.5), (2, 0.3)):
        folder = tmp_path / f"round-{n}"
        folder.mkdir()
        for arm, ttft in (("b", 0.2), ("d", slow_ttft)):
            run = RunResult(
                spec={}, started_at=T0, finished_at=T0 + 25.0, window=(window[0], window[1]),
                samples=_round(10.0, ttft), summary={}, timeseries=[], validity={},
            )  # fmt: skip
            (folder / f"arm-{arm}.json").write_text(
                json.dumps(run.to_json_dict()), encoding="utf-8"
            )
    out = tmp_path / "tails.json"
    assert tail.main([str(tmp_path), "--json", str(out)]) == 0
    every = json.loads(out.read_text(encoding="utf-8"))
    assert list(every) == [str(tmp_path / "round-1"), str(tmp_path / "round-2")]
    assert every[str(tmp_path / "round-2")]["d"]["paired_diff_ms"] == pytest.approx(100)
    assert "median paired difference +300 ms" in capsys.readouterr().out


def test_main_refuses_a_folder_without_runs(tmp_path: Path, capsys) -> None:
    assert tail.main([str(tmp_path)]) == 2
    assert "no arm-X.json" in capsys.readouterr().err
