"""Load generator fidelity and cost (issue 7, part 7). A script, not a test.

    .venv/bin/python lab/bench_loadgen.py [clients] [fidelity] [throughput] [capture] [--quick]

- clients:    client CPU per streamed token, our wire client vs aiohttp vs httpx, at two
              loads, same SSE decoding (the measurement behind the choice of client).
- fidelity:   the load generator's TTFT against the simulator's ground truth
              (`gpu_agent.sim serve --sim-wire-timestamps`: kernel receive time of the request
              to the write of its first content chunk) at 32, 128 and 256 concurrent streams:
              error p50 / p99, split into its receive and send sides.
- throughput: the most streamed tokens per second one client core sustains with 256-token
              outputs = output tokens / client process CPU seconds (and per wall second).
- capture:    TTFT and ITL error against a packet capture (tcpdump on loopback, needs root),
              quiet and starved (two busy loops on the client's core), with the reads the
              client makes (cut at event ends) and with one read per wake-up (the old way):
              p50/p99/max over every figure and over those the run presents as wire times,
              the share of chunks merged, and the client CPU per token of each.

Each server runs as a separate process pinned to core 0; the client (this process) is pinned
to the other cores. Results print as JSON lines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
PIN = hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2
PROCESSES = 1  # client processes for fidelity (--processes)


def _pin(server_pid: int) -> None:
    os.sched_setaffinity(server_pid, {0})
    os.sched_setaffinity(0, set(range(1, os.cpu_count() or 2)))


sys.path.insert(0, str(ROOT))

from gpu_agent.sim.testing import run_sim_process  # noqa: E402
from loadgen import WorkloadSpec, percentile, run_workload  # noqa: E402
from loadgen.client import _StreamState  # noqa: E402
from loadgen.pool import Pool  # noqa: E402
from loadgen.sse import SSEDecoder  # noqa: E402


class Server:
    """The reference streaming server (loadgen.refserver), pinned to core 0."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "loadgen.refserver", "--port", "0", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline().split()[1])
        if PIN:  # server on core 0, the client (this process, its shards) on the others
            _pin(self.proc.pid)
        self.base = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait()


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


# --- clients: the same parsing fed by each HTTP client --------------------------------------

BODY = json.dumps(
    {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 256,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
).encode()


async def _httpx_stream(client: httpx.AsyncClient, url: str) -> int:
    state, decoder = _StreamState(chat=True), SSEDecoder()
    async with client.stream(
        "POST", url, content=BODY, headers={"Content-Type": "application/json"}
    ) as resp:
        async for data in resp.aiter_raw():
            now = time.perf_counter()
            for ev in decoder.feed(data):
                state.on_event(ev.data, ev.event, now)
    assert state.done and state.error is None, state.error
    return state.output_tokens or 0


async def _wire_stream(pool: Any, url: str) -> int:
    state, decoder = _StreamState(chat=True), SSEDecoder()

    def sink(status: int, piece: bytes, stamp: float) -> bool:
        for ev in decoder.feed(piece):
            state.on_event(ev.data, ev.event, stamp)
        return False

    await pool.post(url, {"Content-Type": "application/json"}, BODY, sink)
    assert state.done and state.error is None, state.error
    return state.output_tokens or 0


async def _aiohttp_stream(session: Any, url: str) -> int:
    state, decoder = _StreamState(chat=True), SSEDecoder()
    async with session.post(url, data=BODY, headers={"Content-Type": "application/json"}) as r:
        async for data in r.content.iter_any():
            now = time.perf_counter()
            for ev in decoder.feed(data):
                state.on_event(ev.data, ev.event, now)
    assert state.done and state.error is None, state.error
    return state.output_tokens or 0


async def _client_cost(kind: str, url: str, streams: int, rounds: int) -> dict[str, Any]:
    import aiohttp

    async def drive(one: Any) -> int:
        total = 0
        for _ in range(rounds):
            total += sum(await asyncio.gather(*(one() for _ in range(streams))))
        return total

    cpu0, wall0 = time.process_time(), time.perf_counter()
    if kind.startswith("wire"):
        pool = Pool(split_reads=kind == "wire")
        try:
            tokens = await drive(lambda: _wire_stream(pool, url))
        finally:
            pool.close()
    elif kind == "httpx":
        limits = httpx.Limits(max_connections=streams + 8, max_keepalive_connections=streams + 8)
        async with httpx.AsyncClient(limits=limits, timeout=120) as client:
            tokens = await drive(lambda: _httpx_stream(client, url))
    else:
        connector = aiohttp.TCPConnector(limit=streams + 8)
        async with aiohttp.ClientSession(connector=connector) as session:
            tokens = await drive(lambda: _aiohttp_stream(session, url))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {
        "bench": "clients",
        "client": kind,
        "streams": streams,
        "tokens": tokens,
        "cpu_us_per_token": round(cpu / tokens * 1e6, 2),
        "client_cpu_ratio": round(cpu / wall, 3),
        "tokens_per_wall_s": round(tokens / wall),
    }


def bench_clients(quick: bool) -> None:
    # 256-token streams, one chunk every 5 ms: every chunk arrives in its own read, the
    # client's per-read cost dominates, as it does against a real engine.
    with Server("--ttft-ms", "20", "--itl-ms", "5") as server:
        url = f"{server.base}/v1/chat/completions"
        for streams in (16, 96):
            for kind in ("wire-one-read", "wire", "aiohttp", "httpx", "wire", "wire-one-read"):
                emit(asyncio.run(_client_cost(kind, url, streams, 1 if quick else 2)))


# --- fidelity --------------------------------------------------------------------------------


def _uvloop_run(coro: Any) -> Any:
    from loadgen.loops import new_runner  # uvloop when installed, as the CLI runs

    with new_runner() as runner:
        return runner.run(coro)


def _ms(values: list[float], q: float) -> float:
    return round(percentile(values, q) * 1e3, 3)


def bench_fidelity(quick: bool) -> None:
    """The load generator against the simulator's wire-level ground truth (`/sim/v1/requests`:
    the request's kernel receive time and the write of its first content chunk)."""
    if PIN:  # the simulator on core 0 (below), the client on the others
        os.sched_setaffinity(0, set(range(1, os.cpu_count() or 2)))
    for streams in (32, 128, 256):
        flags = ["--max-num-seqs", str(streams), "--sim-wire-timestamps"]
        with run_sim_process("bench", flags, preset=None, cpus={0} if PIN else None) as base:
            spec = WorkloadSpec(
                base_url=f"{base}/v1",
                model="bench",
                concurrency=streams,
                requests=streams * (1 if quick else 2),
                warmup_s=1.0,
                max_tokens=32,
                prompt_tokens=64,
                processes=PROCESSES,
            )
            since = time.time()
            result = _uvloop_run(run_workload(spec))
            with urllib.request.urlopen(f"{base}/sim/v1/requests?since={since}") as resp:
                truth = {r["id"]: r for r in json.load(resp)["data"]}
        measured = [
            s for s in result.samples if s.ok and not s.warmup and s.ttft and s.response_id in truth
        ]
        # Receive side: when the client says the first token came vs when the sim wrote it.
        seen_late = [
            s.send_time + s.ttft - truth[s.response_id]["first_token_sent_time"] for s in measured
        ]
        # Send side: when the request reached the sim's socket vs the client's send time.
        send_lag = [truth[s.response_id]["received_time"] - s.send_time for s in measured]
        # Whole TTFT: the client's figure vs the sim's own (received -> first chunk written).
        ttft_err = [
            s.ttft
            - (
                truth[s.response_id]["first_token_sent_time"]
                - truth[s.response_id]["received_time"]
            )
            for s in measured
        ]
        # What a handler-start clock would call TTFT (the server's admission backlog removed).
        engine_ttft = [
            truth[s.response_id]["first_token_time"] - truth[s.response_id]["arrival_time"]
            for s in measured
        ]
        v = result.validity
        emit(
            {
                "bench": "fidelity",
                "streams": streams,
                "measured": len(measured),
                "failed": sum(not s.ok for s in result.samples),
                "ttft_p50_ms": _ms([s.ttft for s in measured], 50),
                "engine_ttft_p50_ms": _ms(engine_ttft, 50),
                "first_token_seen_late_p50_ms": _ms(seen_late, 50),
                "first_token_seen_late_p99_ms": _ms(seen_late, 99),
                "send_to_arrival_p50_ms": _ms(send_lag, 50),
                "send_to_arrival_p99_ms": _ms(send_lag, 99),
                "ttft_error_p50_ms": _ms(ttft_err, 50),
                "ttft_error_p99_ms": _ms(ttft_err, 99),
                "ttft_error_max_ms": _ms(ttft_err, 100),
                "client_cpu_ratio": round(v["client_cpu_ratio"], 3),
                "loop_lag_p99_ms": round((v["loop_lag_p99_s"] or 0) * 1e3, 3),
                "receive_times": v.get("receive_times"),
                "flags": v["flags"],
            }
        )


# --- capture: against the wire -----------------------------------------------------------------


def _capture_run(starved: bool, split_reads: bool, quick: bool) -> dict[str, Any]:
    import functools
    import tempfile

    import loadgen.runner as runner_module
    from loadgen import capture
    from loadgen.pool import Pool as WirePool

    cores = sorted(os.sched_getaffinity(0))
    server_cores, client_cores = {cores[0]}, {cores[-1]}
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, client_cores)
    hogs = []
    runner_module.Pool = functools.partial(WirePool, split_reads=split_reads)  # type: ignore[misc]
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            run_sim_process("m", [], preset=None, cpus=server_cores) as base,
        ):
            port = int(base.rsplit(":", 1)[1])
            if starved:
                for _ in range(2):
                    hog = subprocess.Popen([sys.executable, "-c", "while 1: pass"])
                    os.sched_setaffinity(hog.pid, client_cores)
                    hogs.append(hog)
            pcap = Path(tmp) / "run.pcap"
            with capture.tcpdump(pcap, port, cpus=server_cores):
                spec = WorkloadSpec(
                    base_url=f"{base}/v1",
                    model="m",
                    concurrency=4,
                    duration_s=4.0 if quick else 8.0,
                    max_tokens=32,
                    prompt_tokens=64,
                    keep_itl_raw=True,
                )
                result = _uvloop_run(run_workload(spec))
            for hog in hogs:
                hog.kill()
                hog.wait()
            hogs.clear()
            cmp = capture.compare(result.samples, capture.exchanges(capture.read_pcap(pcap), port))
    finally:
        runner_module.Pool = WirePool  # type: ignore[misc]
        for hog in hogs:
            hog.kill()
            hog.wait()
        os.sched_setaffinity(0, before)
    v, overall = result.validity, result.summary["overall"]
    gaps = len(cmp.itl_errors)
    return {
        "bench": "capture",
        "client": "starved (2 busy loops on its core)" if starved else "quiet",
        "reads": "cut at event ends" if split_reads else "one per wake-up",
        "requests": cmp.matched,
        "unmatched": cmp.unmatched,
        "ttft_error_ms": capture.error_ms(cmp.ttft_errors),
        "itl_error_ms": capture.error_ms(cmp.itl_errors),
        "ttft_error_presented_ms": capture.error_ms(cmp.ttft_errors_trusted),
        "itl_error_presented_ms": capture.error_ms(cmp.itl_errors_trusted),
        "itl_gaps": gaps,
        "itl_presented_share": round(len(cmp.itl_errors_trusted) / gaps, 3) if gaps else None,
        "merged_gap_share": round(cmp.merged_gaps / gaps, 4) if gaps else None,
        "merged_not_by_kernel": cmp.merged_not_by_kernel,
        "untrusted": sorted(v["untrusted"]),
        "loop_lag_p99_ms": round((v["loop_lag_p99_s"] or 0) * 1e3, 1),
        "loop_lag_max_ms": round((v["loop_lag_max_s"] or 0) * 1e3, 1),
        "client_cpu_us_per_token": round(v["client_cpu_s"] / overall["output_tokens"] * 1e6, 1),
    }


def bench_capture(quick: bool) -> None:
    # Interleaved, so machine load falls on every variant alike.
    for starved in (False, True):
        for split_reads in (True, False):
            emit(_capture_run(starved, split_reads, quick))


# --- throughput per client core ----------------------------------------------------------------


def bench_throughput(quick: bool) -> None:
    # No pacing: the server writes as fast as it can (burst = events per write); the figure is
    # output tokens per CPU second of the client process, i.e. per client core.
    for burst in ("1", "8"):
        with Server("--ttft-ms", "0", "--itl-ms", "0", "--burst", burst) as server:
            streams = 64
            spec = WorkloadSpec(
                base_url=f"{server.base}/v1",
                model="m",
                concurrency=streams,
                requests=streams * (2 if quick else 6),
                max_tokens=256,
                prompt_tokens=16,
            )
            result = _uvloop_run(run_workload(spec))
            v, overall = result.validity, result.summary["overall"]
            tokens = overall["output_tokens"]
            emit(
                {
                    "bench": "throughput",
                    "server_events_per_write": int(burst),
                    "streams": streams,
                    "tokens": tokens,
                    "failed": overall["errors"],
                    "tokens_per_client_cpu_s": round(tokens / v["client_cpu_s"]),
                    "tokens_per_wall_s": round(overall["output_throughput_tps"]),
                    "client_cpu_ratio": round(v["client_cpu_ratio"], 3),
                }
            )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument(
        "benches",
        nargs="*",
        default=["clients", "fidelity", "throughput"],
        help="clients, fidelity, throughput, capture (not in the default set: needs root)",
    )
    p.add_argument("--quick", action="store_true", help="fewer requests")
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        help="client processes for fidelity (one per spare core)",
    )
    args = p.parse_args()
    global PROCESSES
    PROCESSES = args.processes
    for name in args.benches:
        {
            "clients": bench_clients,
            "fidelity": bench_fidelity,
            "throughput": bench_throughput,
            "capture": bench_capture,
        }[name](args.quick)


if __name__ == "__main__":
    main()
