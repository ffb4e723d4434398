"""lab/engine_windows.py: each window judged against the direct windows nearest it, the pooled
windows, its options, and the fences it puts the client and the fronts behind."""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_agent.cores import pin_process, pin_this_process
from gpu_agent.sim.testing import free_port
from lab import engine_fences as fences
from lab import engine_windows, window_stats
from tests.waiting import wait_answering

ROOT = Path(__file__).resolve().parents[2]


def _row(kind: str, tps: float | None) -> dict[str, object]:
    return {"kind": kind, "engine_tps": tps}


def test_each_window_is_judged_against_the_direct_windows_nearest_it() -> None:
    rows = [_row("d", 2000), _row("p", 1800), _row("b", 1500), _row("d", 1000), _row("p", 900)]
    judged = window_stats.paired(rows)
    assert [(r["kind"], round(r["ratio"], 3)) for r in judged] == [
        ("p", round(1800 / 1500, 3)),  # the mean of the (d) before and after
        ("b", 1.0),
        ("p", 0.9),  # after the last (d): that one alone
    ]
    out = window_stats.summary(rows)
    assert out["d"] == {"windows": 2, "engine_tps_mean": 1500, "ratio_to_direct": None,
                        "ratio_range": None, "computed_ratio_to_direct": None,
                        "computed_ratio_range": None, "steps_ratio_to_direct": None,
                        "steps_ratio_range": None}  # fmt: skip
    assert out["p"]["ratio_to_direct"] == pytest.approx(math.sqrt(1.2 * 0.9))
    assert out["p"]["ratio_range"] == [pytest.approx(0.9), pytest.approx(1.2)]
    assert out["b"]["windows"] == 1


def test_windows_can_be_judged_against_another_reference_kind() -> None:
    """(h) against the fenced direct windows (e) nearest it, and (e) against each other as
    the A/A case; a pool over runs does the same."""
    rows = [_row("d", 2000), _row("e", 1000), _row("h", 990), _row("d", 2000), _row("e", 1200),
            _row("h", 1000)]  # fmt: skip
    judged = window_stats.paired(rows, reference="e")
    assert [(r["kind"], round(r["ratio"], 3)) for r in judged] == [
        ("d", 2.0), ("h", 0.9), ("d", round(2000 / 1100, 3)), ("h", round(1000 / 1200, 3))
    ]  # fmt: skip
    assert [round(r["ratio"], 3) for r in window_stats.paired(rows, True, reference="e")] == [
        round(1000 / 1200, 3), 1.2
    ]  # fmt: skip
    pool = window_stats.pooled([rows, rows], "h", reference="e")
    assert pool["windows"] == 4
    assert pool["ratio"] == pytest.approx(math.sqrt(0.9 * 1000 / 1200))


def test_the_computed_tokens_and_the_steps_are_judged_as_the_generated_tokens_are() -> None:
    rows = [
        {"kind": "d", "engine_tps": 1000, "computed_tps": 4000, "steps_ps": 50},
        {"kind": "c", "engine_tps": 1100, "computed_tps": 3000, "steps_ps": 60},
        {"kind": "d", "engine_tps": 1000, "computed_tps": 2000, "steps_ps": None},
    ]
    out = window_stats.summary(rows)["c"]
    assert out["ratio_to_direct"] == pytest.approx(1.1)
    assert out["computed_ratio_to_direct"] == pytest.approx(1.0)  # 3000 / mean(4000, 2000)
    assert out["steps_ratio_to_direct"] == pytest.approx(1.2)  # the (d) without one left out
    assert [r["ratio"] for r in window_stats.paired(rows, key="steps_ps")] == [1.2]


def test_the_direct_windows_judged_against_each_other_are_the_a_a_case() -> None:
    rows = [_row("d", 2000), _row("p", 1800), _row("d", 1000), _row("d", 1000), _row("b", 1)]
    judged = window_stats.paired(rows, a_a=True)
    assert [(r["kind"], round(r["ratio"], 3)) for r in judged] == [
        ("d", 2.0),  # the first: the next (d) alone
        ("d", round(1000 / 1500, 3)),  # the one before and the one after
        ("d", 1.0),  # the last: the one before alone
    ]
    out = window_stats.direct_a_a(rows)
    assert out["windows"] == 3
    assert out["ratio_to_direct"] == pytest.approx((2.0 * (2 / 3) * 1.0) ** (1 / 3))
    assert out["ratio_range"] == [pytest.approx(2 / 3), pytest.approx(2.0)]
    steady = [_row("d", 1500), _row("p", 1400), _row("d", 1500), _row("d", 1500)]
    assert window_stats.direct_a_a(steady)["ratio_to_direct"] == pytest.approx(1.0)
    assert window_stats.direct_a_a([_row("d", 1500), _row("p", 1)])["windows"] == 0


def test_windows_without_a_figure_or_without_a_direct_window_are_not_judged() -> None:
    assert window_stats.paired([_row("p", 1000), _row("b", 900)]) == []
    assert window_stats.paired([_row("d", 1000), _row("p", None)]) == []
    assert window_stats.summary([_row("p", None)])["p"]["engine_tps_mean"] is None


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--order", "dpx"], "unknown window kinds ['x']"),
        (["--order", ""], "--order empty"),
        (["--burn", "1.5"], "--burn not in (0, 1)"),
        (["--cap", "0"], "--cap < 1"),
        (["--order", "ds"], "unknown window kinds ['s']"),  # stream_pace_ms is removed
        (["--interval-tokens", "0"], "--interval-tokens not in [1, 1024]"),
        (["--model-size", "100", "2"], "--model-size: hidden must be a multiple of 64"),
        (["--model-size", "128", "0"], "layers at least 1, not 128 and 0"),
        (["--engine", "sim", "--model-size", "512", "4"], "--model-size: only with --engine vllm"),
        (["--order", "deh"], "none to fence helpers to"),  # vLLM on every core (the default)
        (["--fence-engine-helpers", "--order", "dg"], "none to fence helpers to"),
    ],
)
def test_bad_arguments_are_refused_naming_what_is_wrong(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        engine_windows.main(argv)
    assert exit_.value.code == 2
    assert says in capsys.readouterr().err


def test_a_run_that_cannot_start_says_why_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fails(args: argparse.Namespace) -> list[dict[str, object]]:
        raise RuntimeError("http://127.0.0.1:1: no local process listens there")

    monkeypatch.setattr(engine_windows, "run", fails)
    assert engine_windows.main(["--engine", "sim", "--order", "dg"]) == 1
    assert "lab.engine_windows: http://127.0.0.1:1: no local process" in capsys.readouterr().err


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a core the engine is not on")
def test_the_client_is_moved_off_the_cores_the_engine_is_bound_to() -> None:
    """--client-off-engine-cores: a local engine (a real process on a port, its thread bound
    to the first core, as vLLM binds its OpenMP threads) leaves the load generator the rest."""
    own = os.sched_getaffinity(0)
    first, port = min(own), free_port()
    engine = subprocess.Popen(
        ["taskset", "-c", str(first), sys.executable, "-m", "http.server", str(port),
         "--bind", "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_answering(f"http://127.0.0.1:{port}/")
        bound = fences.engine_bound(f"http://127.0.0.1:{port}")
        assert bound == {first}
        left = fences.fence_client(own, bound)
        assert left == sorted(own - {first})
        assert os.sched_getaffinity(0) == own - {first}
    finally:
        pin_this_process(own)
        engine.kill()
        engine.wait()
    assert os.sched_getaffinity(0) == own


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a core the engine is not on")
def test_the_client_and_the_joined_gateway_are_pinned_onto_the_engines_cores() -> None:
    """--client-on-engine-cores and window (j): the load generator and a gateway (real
    processes on ports) are pinned onto the core the engine's thread is bound to."""
    own = os.sched_getaffinity(0)
    first, port, front_port = min(own), free_port(), free_port()
    serve = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1"]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    engine = subprocess.Popen(["taskset", "-c", str(first), *serve, str(port)], **quiet)
    front = subprocess.Popen([*serve, str(front_port)], **quiet)
    try:
        wait_answering(f"http://127.0.0.1:{port}/")
        wait_answering(f"http://127.0.0.1:{front_port}/")
        assert os.sched_getaffinity(front.pid) == own
        bound = fences.engine_bound(f"http://127.0.0.1:{port}")
        assert fences.fence_client(own, bound, join=True) == [first]
        assert os.sched_getaffinity(0) == {first}
        front_pid = fences.listener(f"http://127.0.0.1:{front_port}")
        assert front_pid == front.pid
        pin_process(front_pid, bound)  # as run() pins (j)'s gateway
        assert os.sched_getaffinity(front.pid) == {first}
        with pytest.raises(RuntimeError, match="no local process"):
            fences.listener(f"http://127.0.0.1:{free_port()}")
        with pytest.raises(RuntimeError, match="hold every core"):  # nowhere to fence them to
            fences.fence_engine_helpers(f"http://127.0.0.1:{port}", {first}, {first})
    finally:
        pin_this_process(own)
        for proc in (engine, front):
            proc.kill()
            proc.wait()


def test_pooled_windows_are_judged_within_their_own_runs() -> None:
    runs = [
        [_row("d", 1000), _row("n", 900), _row("d", 1000)],
        [_row("d", 2000), _row("n", 1600), _row("d", 2000)],  # a faster run, a larger loss
    ]
    out = window_stats.pooled(runs, "n")
    assert out["windows"] == 2
    assert out["ratio"] == pytest.approx(math.sqrt(0.9 * 0.8))
    low, high = out["interval"]
    assert low < out["ratio"] < high
    a_a = window_stats.pooled(runs, "d")  # every direct window against its neighbours
    assert a_a["windows"] == 4 and a_a["ratio"] == pytest.approx(1.0)
    assert window_stats.pooled(runs, "g") == {
        "kind": "g", "key": "engine_tps", "windows": 0, "ratio": None, "interval": None,
    }  # fmt: skip


def test_pool_refuses_what_is_not_a_record(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "other.json").write_text('{"rounds": []}')
    for argv in (["pool", str(tmp_path / "missing.json"), "--kind", "n"],
                 ["pool", str(tmp_path / "other.json"), "--kind", "n"],
                 ["pool", str(tmp_path / "other.json"), "--kind", "x"]):  # fmt: skip
        with pytest.raises(SystemExit) as exit_:
            engine_windows.main(argv)
        assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("not a lab.engine_windows record") == 2
    assert "invalid choice: 'x'" in err
