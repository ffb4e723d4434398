"""CPU time by process, sampled from /proc, to see where a shared machine's cores go during a
benchmark (docs/performance.md).

    python -m perf.cpu_by_process record OUT.jsonl [--every 1.0] [--for SECONDS]
    python -m perf.cpu_by_process summary OUT.jsonl RUN.json

`record` writes one line a sample: the time and, for every process, its label and cumulative
CPU seconds (utime + stime). `summary` reads a `perf.headline --json` record and prints, for
every arm of every round, the cores each label used inside the arm's measured window.
Labels: the gateway (`python -m gpu_agent`), the bare relay (`gpu_agent.relay_floor`), the
load generator (`perf.headline`), vLLM's processes by their thread name (API server,
EngineCore, workers); the rest is `other`."""

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
    if "-m gpu_agent.relay_floor" in cmd:
        return "relay"
    if "-m gpu_agent" in cmd:
        return "gateway"
    if "perf.headline" in cmd:
        return "loadgen"
    if "perf.cpu_by_process" in cmd:
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
    p = argparse.ArgumentParser(prog="python -m perf.cpu_by_process")
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
