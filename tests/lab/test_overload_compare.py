"""lab/overload_compare.py: recovery judged second by second against a paired control run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.overload_compare import back_after, main, per_second

URL = "http://127.0.0.1:1/v1/chat/completions"


def report(overload_s: float, ttfts: dict[int, float]) -> dict[str, object]:
    """One online request per listed second after the overload, with that TTFT."""
    end = 10.0 + overload_s
    rows = [[URL, "online", end + k + 0.5, ttft, 0.0] for k, ttft in ttfts.items()]
    rows.append([URL, "batch", end + 0.5, 9.0, 0.0])  # another tier: not counted
    return {"overload_s": overload_s, "requests": rows, "gateway": {"target": URL}}


def test_per_second_takes_the_seconds_after_the_overload() -> None:
    seconds = per_second(report(60, {0: 1.0, 2: 0.2}), URL)
    assert seconds[:3] == [1.0, None, 0.2] and len(seconds) == 30


@pytest.mark.parametrize(
    ("run", "control", "back"),
    [
        ([1.0, 0.2, 0.1], [0.1, 0.1, 0.1], 1),  # within 2x from second 1
        ([0.1, 0.3, 0.1], [0.1, 0.1, 0.1], 2),  # a later second over 2x moves it on
        ([0.1, 0.1, 0.5], [0.1, 0.1, 0.1], None),  # not back by the end
        ([0.03, 0.12, None], [0.01, 0.1, 0.1], 0),  # +25 ms covers a small baseline; gaps pass
    ],
)
def test_back_after(run: list[float | None], control: list[float | None], back: int | None) -> None:
    assert back_after(run, control) == back


def test_main_prints_the_second_it_is_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    over = report(60, {0: 2.0, 1: 0.15, 2: 0.1})
    control = report(0, {0: 0.1, 1: 0.1, 2: 0.1})
    (tmp_path / "o.json").write_text(json.dumps(over))
    (tmp_path / "c.json").write_text(json.dumps(control))
    assert main([str(tmp_path / "o.json"), str(tmp_path / "c.json")]) == 0
    assert "back within 2x (+25 ms) of the control from second 1" in capsys.readouterr().out
