"""Where the gateway's CPU goes: py-spy on the gateway while the headline's mixed tiers stream
through it (the seed's tier config verbatim) from the simulator or a real vLLM.

    .venv/bin/python -m lab.gateway_profile [--engine sim|vllm] [--rate 30] [--duration 20]

Prints the gateway's cores (from /proc) and requests per second, and the share of py-spy's
samples by where they were taken: the event loop itself (uvloop's C code: polling, socket
reads and writes done there; py-spy sees it as the loop's own frame) or the innermost project
or library module on the stack (the scheduler, the upstream client, the relay, uvicorn...).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from console.bench.headline.arms import drive
from console.bench.headline.options import ENGINE_NICE
from console.bench.headline.procs import GATEWAY_KEY, run_engine, run_gateway
from console.bench.headline.workload import (
    MODEL,
    SEED_TIER_CONFIG,
    arm_spec,
    engine_flags,
    records_needed,
    write_prompts,
)
from gpu_agent.cores import local_listener
from lab.cpu_by_process import cpu_seconds

LOOP = "the event loop (C)"
PLACES = ("scheduler/", "gpu_agent/", "uvicorn/", "starlette/", "httpx/", "prometheus_client/")


def place(frame: str) -> str | None:
    """The module a py-spy frame ("func (path/file.py:line)") is in, if one we name (pure)."""
    where = frame.rpartition("(")[2]
    for prefix in PLACES:
        if where.startswith(prefix) or f"/{prefix}" in where:
            file = where.split(prefix, 1)[1].split(":", 1)[0]
            return prefix + file
    return None


def shares(raw: Iterable[str]) -> dict[str, float]:
    """Share of samples by place, from py-spy's raw output ("frame;frame;... count" a line;
    pure): a stack whose innermost frame is the loop's runner is the loop's own time, else
    the innermost frame in a module we name, else "other"."""
    counts: collections.Counter[str] = collections.Counter()
    for line in raw:
        stack, _, n = line.rstrip().rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = stack.split(";")
        if frames[-1].startswith("Runner.run ") or frames[-1].startswith("run_forever "):
            counts[LOOP] += int(n)
            continue
        named = (place(f) for f in reversed(frames))
        counts[next((p for p in named if p), "other")] += int(n)
    total = sum(counts.values())
    return {k: v / total for k, v in counts.most_common()} if total else {}


def run(args: argparse.Namespace) -> dict[str, object]:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    seconds = args.duration + args.warmup + 5
    prompts = write_prompts(workdir / "prompts.jsonl", records_needed(args.rate, seconds), 7)
    vllm = None
    if args.engine == "vllm":
        from lab.headline.__main__ import dev_vllm

        vllm = dev_vllm(ENGINE_NICE)
    flags = engine_flags("priority", 1.0, 1, args.engine)
    raw = workdir / "gateway-py-spy.txt"
    with (
        run_engine(MODEL, flags, workdir, "engine", vllm) as engine,
        run_gateway(engine, SEED_TIER_CONFIG, workdir, "gateway") as gateway,
    ):
        pid = local_listener(gateway)
        if pid is None:
            raise RuntimeError(f"no process listening at {gateway}")
        record = [spy, "record", "-p", str(pid), "-r", "200", "-f", "raw", "--nonblocking"]
        record += ["-d", str(int(args.duration + args.warmup)), "-o", str(raw)]
        profiler = subprocess.Popen(record, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        spec = arm_spec(
            base_url=gateway, prompts_file=prompts, rate=args.rate, duration_s=args.duration,
            warmup_s=args.warmup, seed=1, api_key=GATEWAY_KEY,
        )  # fmt: skip
        cpu0, t0 = cpu_seconds(pid) or 0.0, time.monotonic()
        trace = workdir / "engine-trace.json"  # not the gateway's sampler: its own CPU
        result, _, _ = asyncio.run(drive(spec, engine, None, args.engine == "sim", trace))
        cores = ((cpu_seconds(pid) or 0.0) - cpu0) / (time.monotonic() - t0)
        _, err = profiler.communicate(timeout=60)
        if profiler.returncode != 0 or not raw.is_file():
            raise RuntimeError(f"py-spy failed ({profiler.returncode}): {err.decode()[-500:]}")
    completed = (result.summary.get("overall") or {}).get("completed") or 0
    return {
        "engine": args.engine,
        "gateway_cores": cores,
        "requests_per_s": completed / args.duration,
        "cpu_ms_per_request": 1000 * cores * args.duration / completed if completed else None,
        "samples": shares(raw.read_text(encoding="utf-8").splitlines()),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.gateway_profile", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--engine", choices=("sim", "vllm"), default="sim")
    p.add_argument("--rate", type=float, default=30.0, help="requests per second")
    p.add_argument("--duration", type=float, default=20.0, help="measured seconds")
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--workdir", default="gateway-profile")
    p.add_argument("--json", help="also write the figures here, with the command")
    args = p.parse_args(argv)
    if args.rate <= 0 or args.duration <= 0:
        p.error("--rate and --duration must be > 0")
    out = run(args)
    print(json.dumps(out, indent=2))
    if args.json:
        command = [
            "python",
            "-m",
            "lab.gateway_profile",
            *(sys.argv[1:] if argv is None else argv),
        ]
        Path(args.json).write_text(json.dumps({"command": command, **out}, indent=2), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
