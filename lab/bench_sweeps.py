"""A sweep's wall time per trial, against the demo's nodes: where the time of a trial goes.

    python lab/bench_sweeps.py [--kind tier_config|launch_profile|both] [--duration 10]
                                [--repeats 1] [--json FILE]

Starts `manage.py demo` on a throwaway data directory (its console, Celery worker with beat,
and two managed agents supervising simulated engines; the demo's fixed ports 8101/8102 and
9101/9102 must be free), then creates sweeps on demo-node-1 through the product's own
services, exactly as the API would, and waits for the demo's worker to finish them:
- tier config (hot-applied): scheduler.admission.max_in_flight 16, 32, 64;
- launch profile (engine restart through the supervisor): max_num_seqs 32, 128.
Each trial is split into apply (desired version set -> the heartbeats report it applied and
the node healthy; for a launch profile that is the engine's restart and health), benchmark
(its runs: measured window vs the rest of each run, i.e. snapshot, prefix-cache reset,
probes, the drain of the last requests and storing the samples) and the rest (scoring,
bookkeeping); the restore is from the last trial's end to the sweep's.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
NODE = "demo-node-1"
SWEEPS = {
    "tier_config": [{"path": "scheduler.admission.max_in_flight", "values": [16, 32, 64]}],
    "launch_profile": [{"path": "max_num_seqs", "values": [32, 128]}],
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception:  # the console still starting, the database still migrating
            value = None
        if value:
            return value
        time.sleep(0.5)
    raise SystemExit(f"timed out waiting for {what}")


def start_demo(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    log = open(data_dir / "demo.log", "ab")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen(
        [sys.executable, "manage.py", "demo", "--port", str(port)],
        cwd=ROOT,
        env={**os.environ, "TIERGATE_DATA_DIR": str(data_dir)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def run_sweep(kind: str, duration: float, repeats: int) -> dict[str, Any]:
    from console.bench.sweeps.models import Sweep
    from console.bench.sweeps.services import create_sweep
    from console.fleet.models import Node

    node = Node.objects.get(name=NODE)
    workload = {
        "concurrency": 32,
        "duration_s": duration,
        "prompt_tokens": 256,
        "max_tokens": 64,
        "tier_mix": {"online": 0.7, "batch": 0.2, "offline": 0.1},
    }
    load_before = os.getloadavg()
    sweep = create_sweep(
        {
            "name": f"perf {kind}",
            "node": node.pk,
            "kind": kind,
            "variables": SWEEPS[kind],
            "workload": workload,
            "repeats": repeats,
            "objective": "min_online_ttft_p99",
        },
        None,
    )
    started = time.monotonic()
    etas = []
    while not Sweep.objects.get(pk=sweep.pk).is_finished:
        eta = Sweep.objects.values_list("eta_s", flat=True).get(pk=sweep.pk)
        etas.append((round(time.monotonic() - started, 1), eta))
        time.sleep(1)
    sweep.refresh_from_db()
    return describe(sweep, time.monotonic() - started, load_before, os.getloadavg(), etas)


def describe(
    sweep: Any, wall: float, load_before: Any, load_after: Any, etas: list[Any]
) -> dict[str, Any]:
    from console.bench.models import BenchmarkRun

    rows = []
    last_end = None
    for trial in sweep.trials.order_by("index"):
        runs = list(BenchmarkRun.objects.filter(series=trial.series)) if trial.series_id else []
        measured = sum(
            (r.measured_to - r.measured_from).total_seconds()
            for r in runs
            if r.measured_from and r.measured_to
        )
        trial_wall = (
            (trial.finished_at - trial.started_at).total_seconds()
            if trial.started_at and trial.finished_at
            else None
        )
        bench = trial.bench_s or 0.0
        rows.append(
            {
                "trial": trial.index,
                "values": trial.values_label,
                "status": trial.status,
                "wall_s": trial_wall,
                "apply_s": trial.apply_s,
                "bench_s": trial.bench_s,
                "measured_s": measured,
                "run_overhead_s": bench - measured,
                "rest_s": None if trial_wall is None else trial_wall - (trial.apply_s or 0) - bench,
                "online_ttft_p99_ms": (trial.metrics.get("ttft_p99_ms") or {}).get("online"),
                "throughput_rps": trial.metrics.get("throughput_rps"),
            }
        )
        last_end = trial.finished_at or last_end
    restore = (
        (sweep.finished_at - last_end).total_seconds() if sweep.finished_at and last_end else None
    )
    return {
        "sweep": sweep.pk,
        "kind": sweep.kind,
        "status": sweep.status,
        "reason": sweep.status_reason,
        "restored": sweep.restored,
        "best": sweep.best_trial.values_label if sweep.best_trial else None,
        "wall_s": wall,
        "restore_s": restore,
        "load_before": load_before,
        "load_after": load_after,
        "trials": rows,
        "etas": etas,
    }


def show(result: dict[str, Any]) -> None:
    print(
        f"\n{result['kind']} sweep #{result['sweep']}: {result['status']} ({result['reason']}), "
        f"restored={result['restored']}, best: {result['best']}, "
        f"wall {result['wall_s']:.1f} s, restore {result['restore_s']:.1f} s, "
        f"load {result['load_before'][0]:.1f} -> {result['load_after'][0]:.1f}"
    )
    print(
        f"{'trial':>5} {'values':<42} {'wall':>6} {'apply':>6} {'bench':>6} "
        f"{'measured':>8} {'run+':>6} {'rest':>5} {'ttft99':>7} {'rps':>6}"
    )
    for r in result["trials"]:

        def f(v: Any, w: int, d: int = 1) -> str:
            return f"{v:>{w}.{d}f}" if isinstance(v, int | float) else f"{'-':>{w}}"

        print(
            f"{r['trial']:>5} {r['values'][:42]:<42} {f(r['wall_s'], 6)} {f(r['apply_s'], 6)} "
            f"{f(r['bench_s'], 6)} {f(r['measured_s'], 8)} {f(r['run_overhead_s'], 6)} "
            f"{f(r['rest_s'], 5)} {f(r['online_ttft_p99_ms'], 7, 0)} {f(r['throughput_rps'], 6)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=["tier_config", "launch_profile", "both"], default="both")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="tiergate-sweep-perf-"))
    port = free_port()
    demo = start_demo(data_dir, port)
    try:
        wait(
            lambda: httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200,
            180,
            "the demo console",
        )
        os.environ["TIERGATE_DATA_DIR"] = str(data_dir)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        from console.fleet.choices import EndpointKind
        from console.fleet.models import Endpoint, Node

        def ready() -> bool:
            node = Node.objects.get(name=NODE)
            return (
                node.status() == "healthy"
                and node.applied_launch_profile_id == node.desired_launch_profile_id
                and node.applied_tier_config_id == node.desired_tier_config_id
                and Endpoint.objects.filter(node=node, kind=EndpointKind.GATEWAY).exists()
            )

        wait(ready, 180, f"{NODE} to be healthy on its versions")
        kinds = ["tier_config", "launch_profile"] if args.kind == "both" else [args.kind]
        results = [run_sweep(kind, args.duration, args.repeats) for kind in kinds]
        for result in results:
            show(result)
        if args.json:
            args.json.write_text(json.dumps(results, indent=2, default=str))
    finally:
        demo.send_signal(signal.SIGINT)
        try:
            demo.wait(60)
        except subprocess.TimeoutExpired:
            demo.kill()
        print(f"\n(demo data and logs in {data_dir})")


if __name__ == "__main__":
    main()
