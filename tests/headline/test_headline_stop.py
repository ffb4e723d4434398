"""`python -m perf.headline --rounds N` stopped part-way, as an operator or a CI job stops a run
of an hour: SIGTERM stops the engines and gateways it started (in process groups of their own,
so nothing else would), and its `--json` already holds the rounds it finished, which pool.

Real processes: the headline run, its simulators and gateways."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perf.headline.round_sets import from_record

ROOT = Path(__file__).resolve().parents[2]


def _descendants(pid: int) -> set[int]:
    """Every process below `pid`, from /proc (each stat's fourth field is its parent)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _rounds_done(path: Path) -> int:
    return json.loads(path.read_text())["rounds"] if path.exists() else 0


@pytest.mark.slow
def test_a_run_stopped_part_way_keeps_its_rounds_and_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    out, log = tmp_path / "rounds.json", tmp_path / "headline.log"
    argv = [sys.executable, "-m", "perf.headline", "--rounds", "8", "--arms", "ab",
            "--reference", "b", "--no-search", "--rate", "12", "--duration", "2", "--warmup",
            "1", "--seed", "7", "--workdir", str(tmp_path / "w"), "--json", str(out)]  # fmt: skip
    with open(log, "wb") as sink:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while _rounds_done(out) < 2:  # the record is on disk after each round, not at the end
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "two rounds did not finish in 300 s"
            time.sleep(0.2)
        started: set[int] = set()
        while not started:  # round 3's engine (and a gateway, in arm a) is up
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "round 3 started nothing"
            started = _descendants(proc.pid)
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    left = {pid for pid in started if _running(pid)}
    assert not left, f"still running after the run stopped: {sorted(left)}"
    record = json.loads(out.read_text())
    assert (record["rounds"], record["rounds_planned"]) == (2, 8)
    assert [d["workload"]["seed"] for d in record["docs"]] == [7, 8]
    assert set(record["judgement"]) == {"a"}  # two rounds: a verdict
    assert not list(tmp_path.glob("*.part"))
    rounds = from_record(record, "a", "b", "stopped")["rounds"]
    assert len(rounds) == 2 and all(r["p99_ratio"] > 0 for r in rounds)
