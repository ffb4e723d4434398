"""Rollout and rollback time at fleet scale: N light agents heartbeating to one console.

    python lab/bench_rollouts.py [--agents 100] [--canaries 1] [--wave-size 0]
                                  [--interface asgi|wsgi] [--console-workers 1]

The console is uvicorn serving console.asgi (a subprocess) on a throwaway SQLite database.
The agents are asyncio loops in this process that speak docs/protocol.md with httpx: every
beat (at the interval the console replies, 1 s by default) they post one sample and their
applied versions, and "apply" a differing desired tier config at once, reporting it on the
next beat, which is the fastest a real agent could. The rollout's executor (the Celery
task's body) runs in a process of its own, started beforehand like a warm worker.

Measured: from creating the rollout to every agent having applied the new version, and to
the rollout being marked succeeded; then the same for a one-click rollback of it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from loadgen import percentile

ROOT = Path(__file__).resolve().parent.parent


class LightAgent:
    def __init__(self, name: str, token: str) -> None:
        self.name = name
        self.token = token
        self.applied: dict[str, int | None] = {"tier_config": None, "launch_profile": None}
        self.applied_at: dict[int, float] = {}
        self.keys_version = ""
        self.interval = 1.0
        self.beats = 0

    def body(self) -> dict[str, Any]:
        now = time.time()
        tiers = {
            t: {
                "depth": 0,
                "in_flight": 1,
                "finished": 10,
                "errors": 0,
                "rejected": 0,
                "ttft_p50_s": 0.05,
                "ttft_p99_s": 0.1,
            }
            for t in ("online", "batch", "offline")
        }
        return {
            "agent_version": "bench",
            "mode": "attached",
            "listen_url": "",
            "applied": dict(self.applied),
            "keys_version": self.keys_version,
            "health": {"gateway": "ok", "engine": "ok", "detail": ""},
            "engine": {
                "url": "http://127.0.0.1:1",
                "model": "bench",
                "simulated": True,
                "args": {},
            },
            "samples": [
                {"ts": now, "gpu_source": "simulated", "gpus": [], "engine": {}, "tiers": tiers}
            ],
        }

    async def run(self, url: str, latencies: list[float]) -> None:
        # A client per agent, as each real agent has: one shared 100-connection pool costs the
        # client side far more CPU per request (httpcore scans its pool on every request).
        async with httpx.AsyncClient(timeout=10) as client:
            await self.loop(client, url, latencies)

    async def loop(self, client: httpx.AsyncClient, url: str, latencies: list[float]) -> None:
        await asyncio.sleep(random.random() * self.interval)  # agents do not beat in lockstep
        while True:
            start = time.perf_counter()
            try:
                response = await client.post(
                    url, json=self.body(), headers={"Authorization": f"Bearer {self.token}"}
                )
            except httpx.HTTPError:
                await asyncio.sleep(self.interval)
                continue
            latencies.append(time.perf_counter() - start)
            if response.status_code == 200:
                reply = response.json()
                self.beats += 1
                self.interval = float(reply.get("heartbeat_interval_s", 1.0))
                self.keys_version = reply.get("keys_version", "")
                wanted = (reply.get("desired") or {}).get("tier_config")
                if wanted and wanted["id"] != self.applied["tier_config"]:
                    self.applied["tier_config"] = wanted["id"]
                    self.applied_at[wanted["id"]] = time.monotonic()
            await asyncio.sleep(max(0.0, self.interval - (time.perf_counter() - start)))


def setup_django(data: str) -> None:
    os.environ.update(
        TIERGATE_DATA_DIR=data,
        DATABASE_URL=f"sqlite:///{data}/bench.sqlite3",
        DJANGO_SETTINGS_MODULE="console.settings",
        TIERGATE_LOG_LEVEL="WARNING",
    )
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def cpu_seconds(pid: int, children: bool = False) -> float:
    """User + system CPU of a process (Linux /proc), and of its live children if asked
    (uvicorn's worker processes)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    pids = [pid]
    if children:
        with contextlib.suppress(OSError):
            pids += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    for one in pids:
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:13]) / tick  # utime stime
    return total


def start_console(port: int, interface: str, workers: int) -> subprocess.Popen[bytes]:
    app = (
        ["console.asgi:application"]
        if interface == "asgi"
        else ["console.wsgi:application", "--interface", "wsgi"]
    )
    log = open(Path(os.environ["TIERGATE_DATA_DIR"]) / "console.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            *app,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--no-access-log",
            "--backlog",
            "1024",
            "--workers",
            str(workers),
        ],
        cwd=ROOT,
        env=os.environ.copy(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz?worker=0", timeout=2).status_code < 500:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the console did not start")


async def until(predicate: Any, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.02)
    return time.monotonic()


# A warm "worker": reads rollout ids on stdin, executes each (the Celery task's body), prints
# the final state.
WORKER = """
import sys
import django
django.setup()
from console.tuning.rollouts.executor import execute
print("ready", flush=True)
for line in sys.stdin:
    print(execute(int(line), poll_s=0.1), flush=True)
"""


def start_worker() -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER],
        cwd=ROOT,
        env=os.environ.copy(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


async def measure(
    agents: list[LightAgent], version_id: int, start_rollout: Any, worker: subprocess.Popen[str]
) -> dict[str, Any]:
    """Create the rollout (in a thread: the ORM is synchronous), hand it to the worker, and
    time every agent applying `version_id` and the executor's end."""
    assert worker.stdin is not None and worker.stdout is not None
    t0 = time.monotonic()
    rollout = await asyncio.to_thread(start_rollout)
    worker.stdin.write(f"{rollout.pk}\n")
    worker.stdin.flush()
    executor = asyncio.create_task(asyncio.to_thread(worker.stdout.readline))
    all_applied = await until(
        lambda: all(a.applied["tier_config"] == version_id for a in agents), 60
    )
    state = (await executor).strip()
    done = time.monotonic()
    await asyncio.to_thread(rollout.refresh_from_db)
    return {
        "rollout": rollout,
        "state": state,
        "all_applied_s": all_applied - t0,
        "finished_s": done - t0,
        "waves": await asyncio.to_thread(lambda: rollout.nodes.order_by("-wave").first().wave + 1),
    }


async def bench(
    args: argparse.Namespace,
    port: int,
    nodes: list[tuple[str, str]],
    v1: Any,
    v2: Any,
    worker: subprocess.Popen[str],
    console: subprocess.Popen[bytes],
) -> None:
    pids = {"console": console.pid, "executor": worker.pid, "agents (this process)": os.getpid()}
    from console.tuning.rollouts import services

    agents = [LightAgent(name, token) for name, token in nodes]
    latencies: list[float] = []
    if True:
        url = f"http://127.0.0.1:{port}/api/v1/agent/heartbeat"
        tasks = [asyncio.create_task(a.run(url, latencies)) for a in agents]
        await until(lambda: all(a.applied["tier_config"] == v1.pk for a in agents), 60)
        await asyncio.sleep(2)  # steady state before measuring
        latencies.clear()
        wall0, cpu0 = (
            time.monotonic(),
            {name: cpu_seconds(pid, name == "console") for name, pid in pids.items()},
        )
        out = await measure(
            agents,
            v2.pk,
            lambda: services.create_rollout(
                tier_config=v2,
                canary_count=args.canaries,
                wave_size=args.wave_size,
                convergence_timeout_s=60,
                start=False,
            ),
            worker,
        )
        back = await measure(
            agents, v1.pk, lambda: services.rollback_rollout(out["rollout"], start=False), worker
        )
        wall = time.monotonic() - wall0
        cpu = {name: cpu_seconds(pid, name == "console") - cpu0[name] for name, pid in pids.items()}
        for task in tasks:
            task.cancel()
    print(
        f"{args.agents} agents, heartbeat every {agents[0].interval:g} s, "
        f"console: uvicorn {args.interface.upper()}, {args.console_workers} process(es), SQLite"
    )
    print(
        f"rollout  {out['state']:>9}: {out['waves']} waves, "
        f"all applied {out['all_applied_s']:.2f} s, "
        f"rollout finished {out['finished_s']:.2f} s"
    )
    print(
        f"rollback {back['state']:>9}: {back['waves']} wave,  "
        f"all applied {back['all_applied_s']:.2f} s, "
        f"rollback finished {back['finished_s']:.2f} s"
    )
    print(
        f"CPU over the measured {wall:.1f} s: "
        + ", ".join(
            f"{name} {seconds:.1f} s ({seconds / wall * 100:.0f} % of a core)"
            for name, seconds in cpu.items()
        )
        + f"; machine load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    lat = sorted(latencies)
    print(
        f"heartbeat round trips during both: {len(lat)}, "
        f"p50 {percentile(lat, 50) * 1000:.1f} ms, "
        f"p99 {percentile(lat, 99) * 1000:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--canaries", type=int, default=1)
    parser.add_argument("--wave-size", type=int, default=0, help="0: all the rest in one wave")
    parser.add_argument(
        "--interface",
        choices=("asgi", "wsgi"),
        default="asgi",
        help="serve console.asgi, or console.wsgi through uvicorn's WSGI interface",
    )
    parser.add_argument("--console-workers", type=int, default=1)
    args = parser.parse_args()
    setup_django(tempfile.mkdtemp(prefix="tg-rollout-bench-"))
    from django.core.management import call_command

    from console.fleet import services as fleet
    from console.tuning.services import create_tier_config
    from scheduler import config_to_dict, default_config

    call_command("migrate", verbosity=0)
    base = config_to_dict(default_config())
    v1 = create_tier_config(name="bench", config=base)
    changed = {
        **base,
        "scheduler": {
            **base["scheduler"],
            "queues": {
                **base["scheduler"]["queues"],
                "online": {**base["scheduler"]["queues"]["online"], "max_waiting_time_ms": 5},
            },
        },
    }
    v2 = create_tier_config(name="bench", config=changed)
    nodes = []
    for i in range(args.agents):
        node, token = fleet.create_node(f"bench-{i:03d}", ["bench"], None)
        nodes.append((node.name, token))
    from console.fleet.models import Node

    fleet.set_desired(Node.objects.all(), tier_config=v1)
    from gpu_agent.sim.testing import free_port

    port = free_port()
    console = start_console(port, args.interface, args.console_workers)
    worker = start_worker()
    try:
        asyncio.run(bench(args, port, nodes, v1, v2, worker, console))
    finally:
        for proc in (worker, console):
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
