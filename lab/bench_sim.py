"""Does one simulator process on one core keep the model's step timing under 256 streams?

Starts ``python -m gpu_agent.sim serve`` pinned to one core (taskset), drives it from this
process (pinned to another core) with N concurrent streaming completions through aiohttp, and
compares, over a steady window, the wall time the server measured for back-to-back steps with
the time the model asked for (/sim/v1/gpu "steps"). Also reports the server's CPU use.

    .venv/bin/python lab/bench_sim.py --concurrency 256 --duration 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

import aiohttp
import httpx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from gpu_agent.sim.testing import free_port


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Tally:
    chunks = 0
    requests = 0


async def one_stream(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> None:
    async with session.post(url, json=body) as response:
        response.raise_for_status()
        async for line in response.content:
            if line.startswith(b"data: {"):
                Tally.chunks += 1
    Tally.requests += 1


async def drive(base_url: str, args: argparse.Namespace) -> dict[str, Any]:
    url = base_url + "/v1/completions"
    body = {
        "model": "bench",
        "prompt": "word " * args.prompt_words,
        "max_tokens": args.max_tokens,
        "stream": True,
        "ignore_eos": True,
    }
    stop_at = time.monotonic() + args.warmup + args.duration

    async def worker() -> None:
        while time.monotonic() < stop_at:
            await one_stream(session, url, body)

    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        workers = [asyncio.create_task(worker()) for _ in range(args.concurrency)]
        await asyncio.sleep(args.warmup)
        async with httpx.AsyncClient(base_url=base_url) as control:
            start = (await control.get("/sim/v1/gpu")).json()
            cpu0, wall0, chunks0 = cpu_seconds(args.server_pid), time.monotonic(), Tally.chunks
            running: list[int] = []
            while time.monotonic() < stop_at - 0.5:
                await asyncio.sleep(0.5)
                running.append((await control.get("/sim/v1/gpu")).json()["num_requests_running"])
            end = (await control.get("/sim/v1/gpu")).json()
            cpu1, wall1, chunks1 = cpu_seconds(args.server_pid), time.monotonic(), Tally.chunks
        await asyncio.gather(*workers)
    steps = end["steps"]["timed"] - start["steps"]["timed"]
    modelled = end["steps"]["modelled_s"] - start["steps"]["modelled_s"]
    measured = end["steps"]["measured_s"] - start["steps"]["measured_s"]
    late = end["steps"]["late_s"] - start["steps"]["late_s"]
    return {
        "concurrency": args.concurrency,
        "window_s": round(wall1 - wall0, 2),
        "steps": steps,
        "mean_modelled_step_ms": round(1000 * modelled / max(steps, 1), 3),
        "mean_measured_step_ms": round(1000 * measured / max(steps, 1), 3),
        "measured_over_modelled": round(measured / modelled, 4) if modelled else None,
        "untimed_steps": (end["steps"]["total"] - start["steps"]["total"]) - steps,
        "server_cpu_share": round((cpu1 - cpu0) / (wall1 - wall0), 3),
        "tokens_per_s": round((chunks1 - chunks0) / (wall1 - wall0), 1),
        "running_min_max": [min(running, default=0), max(running, default=0)],
        "mean_late_ms": round(1000 * late / max(steps, 1), 3),
        "requests_done": Tally.requests,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--prompt-words", type=int, default=200)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--server-core", default="0")
    parser.add_argument("--client-core", default="1")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "gpu_agent.sim",
        "serve",
        "bench",
        "--port",
        str(port),
        "--max-num-seqs",
        str(args.concurrency),
    ]
    if shutil.which("taskset"):
        command = ["taskset", "-c", args.server_core, *command]
        os.sched_setaffinity(0, {int(args.client_core)})
    server = subprocess.Popen(command, cwd=os.path.join(os.path.dirname(__file__), ".."))
    args.server_pid = server.pid
    base_url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                if httpx.get(base_url + "/health").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        figures = asyncio.run(drive(base_url, args))
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(json.dumps(figures, indent=2))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(figures, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
