"""CPU time by process, sampled from /proc, to see where a shared machine's cores go during a
benchmark (docs/performance.md).

    python -m lab.cpu_by_process record OUT.jsonl [--every 1.0] [--for SECONDS]
    python -m lab.cpu_by_process summary OUT.jsonl RUN.json

`record` writes one line a sample: the time and, for every process, its label and cumulative
CPU seconds (utime + stime). `summary` reads a `lab.headline --json` record and prints, for
every arm of every round, the cores each label used inside the arm's measured window.
Labels: the gateway (`python -m gpu_agent`), the bare relay (`lab.relay_floor`), the
load generator (`lab.headline`, `lab.engine_windows`) and its burner, the simulator,
vLLM's processes by their thread name (API server, EngineCore, workers); the rest is `other`."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")


def label(pid: int) -> str | None:
    try:
        cmd = (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None
    if "-m gpu_agent.sim" in cmd:
        return "simulator"
    if "-m lab.relay_floor" in cmd:
        return "relay"
    if "-m gpu_agent" in cmd:
        return "gateway"
    if "-m lab.burner" in cmd:
        return "burner"
    if "lab.headline" in cmd or "lab.engine_windows" in cmd:
        return "loadgen"
    if "lab.cpu_by_process" in cmd:
        return "sampler"
    if comm.startswith("VLLM") or "vllm" in cmd:
        return "vllm:" + (comm if comm.startswith("VLLM") else "api_server")
    return "other"


def cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


SCHED_FIELDS = ("run_s", "wait_s", "voluntary", "involuntary")


def sched_of(pid: int) -> tuple[float, float, int, int] | None:
    """What the scheduler did with a process, summed over its threads: seconds on a core,
    seconds runnable but waiting for one (/proc/PID/task/TID/schedstat), and its voluntary and
    involuntary context switches. None once the process is gone."""
    run = wait = voluntary = involuntary = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}"
        try:
            on_core, queued, _ = Path(base + "/schedstat").read_text().split()
            status = Path(base + "/status").read_text().splitlines()
        except (OSError, ValueError):
            continue  # the thread ended between the listing and the read
        run, wait = run + int(on_core), wait + int(queued)
        for line in status:
            if line.startswith("voluntary_ctxt_switches:"):
                voluntary += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                involuntary += int(line.split()[1])
    return run / 1e9, wait / 1e9, voluntary, involuntary


def sched_by_label(named: dict[int, str] | None = None) -> dict[str, list[float]]:
    """`sched_of` summed by label over every labelled process but the unlabelled rest: one
    reading of the machine, to subtract from a later one (`sched_rates`). The processes in
    `named` take the label given there, the others label()'s."""
    totals: dict[str, list[float]] = {}
    named = named or {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        name = named.get(int(entry.name)) or label(int(entry.name))
        got = sched_of(int(entry.name)) if name not in (None, "other") else None
        if name is None or got is None:
            continue
        row = totals.setdefault(name, [0.0] * len(SCHED_FIELDS))
        for i, value in enumerate(got):
            row[i] += value
    return totals


def sched_rates(
    before: dict[str, list[float]], after: dict[str, list[float]], seconds: float
) -> dict[str, dict[str, float]]:
    """Per label, each of SCHED_FIELDS per second between two readings: cores used, cores'
    worth of waiting to run, switches a second (labels in both readings only)."""
    return {
        name: {
            field: (after[name][i] - before[name][i]) / seconds
            for i, field in enumerate(SCHED_FIELDS)
        }
        for name in sorted(after.keys() & before.keys())
    }


def record(out: Path, every: float, seconds: float | None) -> None:
    end = None if seconds is None else time.time() + seconds
    labels: dict[int, str | None] = {}
    with out.open("a", encoding="utf-8") as f:
        while end is None or time.time() < end:
            sample: dict[str, Any] = {"t": time.time(), "p": {}}
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit():
                    continue
                pid = int(entry.name)
                if pid not in labels or labels[pid] == "vllm:api_server":
                    # A forked vLLM process takes its thread name (VLLM::...) after a moment.
                    labels[pid] = label(pid)
                name = labels[pid]
                used = cpu_seconds(pid)
                if name is None or used is None:
                    continue
                sample["p"][str(pid)] = [name, used]
            f.write(json.dumps(sample) + "\n")
            f.flush()
            time.sleep(every)


def cores_in(samples: list[dict[str, Any]], start: float, end: float) -> dict[str, float]:
    """Cores used per label between the samples nearest `start` and `end`."""
    inside = [s for s in samples if start <= s["t"] <= end]
    if len(inside) < 2:
        return {}
    first, last = inside[0], inside[-1]
    span = last["t"] - first["t"]
    used: dict[str, float] = defaultdict(float)
    for pid, (name, seconds) in last["p"].items():
        before = first["p"].get(pid)
        used[name] += seconds - (before[1] if before else 0.0)
    return {name: value / span for name, value in sorted(used.items())}


def summary(samples_path: Path, run_path: Path) -> None:
    samples = [json.loads(line) for line in samples_path.read_text().splitlines() if line]
    run = json.loads(run_path.read_text())
    docs = run.get("docs") or [run]
    for i, doc in enumerate(docs, 1):
        for arm in doc["arms"]:
            start = arm["window"][0]
            end = start + doc["workload"]["duration_s"] if "workload" in doc else arm["window"][1]
            cores = cores_in(samples, start, end)
            total = sum(cores.values())
            parts = ", ".join(f"{k} {v:.2f}" for k, v in cores.items() if v >= 0.01)
            print(f"round {i} arm {arm['key']}: total {total:.2f} cores: {parts}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.cpu_by_process")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("out", type=Path)
    r.add_argument("--every", type=float, default=1.0)
    r.add_argument("--for", dest="seconds", type=float)
    s = sub.add_parser("summary")
    s.add_argument("samples", type=Path)
    s.add_argument("run", type=Path)
    args = p.parse_args(argv)
    if args.cmd == "record":
        record(args.out, args.every, args.seconds)
    else:
        summary(args.samples, args.run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
