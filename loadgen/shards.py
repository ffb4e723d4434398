"""One workload over several client processes, one event loop per core.

One Python event loop handles streamed chunks one after another, so when hundreds of streams
deliver a token in the same engine step the last of them is seen milliseconds late. Splitting
the streams over processes bounds that burst per loop. The parent only starts the shards,
relays progress and cancel, and merges their samples; every figure is recomputed from the
merged samples.

Each shard is a `python -m loadgen.shard_child` process (its protocol is described there). The
parent side here never imports the runner: the runner calls this module, the shard process
calls the runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from loadgen import stats
from loadgen.spec import Stage, WorkloadSpec
from loadgen.types import Progress, RequestSample, RunResult

START_MARGIN_S = 1.5  # time for every shard to import and open its loop before the start
SEED_STRIDE = 1000
SHARD_MODULE = "loadgen.shard_child"  # the child process's entry point


def _share(total: int, parts: int, i: int) -> int:
    return total // parts + (1 if i < total % parts else 0)


def split_spec(spec: WorkloadSpec) -> list[WorkloadSpec]:
    """The per-process specs; together they make the same load as `spec`."""
    parts = spec.processes
    if spec.stages:
        parts = min(parts, *(s.concurrency for s in spec.stages))
    elif spec.concurrency is not None:
        parts = min(parts, spec.concurrency)
    if spec.requests is not None:
        parts = min(parts, spec.requests)
    parts = max(parts, 1)
    shards = []
    for i in range(parts):
        shards.append(
            dataclasses.replace(
                spec,
                processes=1,
                seed=spec.seed * SEED_STRIDE + i,
                concurrency=None
                if spec.concurrency is None
                else _share(spec.concurrency, parts, i),
                rate=None if spec.rate is None else spec.rate / parts,
                stages=[Stage(_share(s.concurrency, parts, i), s.duration_s) for s in spec.stages],
                requests=None if spec.requests is None else _share(spec.requests, parts, i),
                keep_itl_raw=True,  # the parent pools every gap
            )
        )
    return shards


def merge(spec: WorkloadSpec, parts: list[dict[str, Any]], cancelled: bool) -> RunResult:
    samples = [RequestSample.from_dict(s) for part in parts for s in part["samples"]]
    samples.sort(key=lambda s: s.send_time)
    for index, sample in enumerate(samples):
        sample.index = index
    window = (min(p["window"][0] for p in parts), max(p["window"][1] for p in parts))
    started_at = min(p["started_at"] for p in parts)
    summary, series, ladder = stats.run_figures(spec, samples, started_at, window)
    busiest = max(parts, key=lambda p: p["validity"]["client_cpu_ratio"] or 0)
    validity = stats.validity(
        samples,
        loop_lags=[],
        cpu_s=busiest["validity"]["client_cpu_s"],
        wall_s=busiest["validity"]["wall_s"],
    )
    # Loop lag is per process: report the worst shard's, and flag on it.
    for key in ("loop_lag_p99_s", "loop_lag_max_s"):
        values = [p["validity"][key] for p in parts if p["validity"][key] is not None]
        validity[key] = max(values) if values else None
    validity["loop_lag_s"] = max(
        (p["validity"]["loop_lag_s"] for p in parts), key=lambda d: d["p99"] or 0
    )
    validity["flags"] = sorted(
        {f for p in parts for f in p["validity"]["flags"] if f.startswith("loop_lag")}
        | set(validity["flags"])
    )
    validity["valid"] = not validity["flags"]
    validity["processes"] = len(parts)
    kinds = {p["validity"].get("receive_times") for p in parts}
    validity["receive_times"] = "kernel" if kinds == {"kernel"} else "read"
    validity["clock_steps"] = sum(p["validity"].get("clock_steps", 0) for p in parts)
    validity["untrusted"] = stats.untrusted(validity)
    if not spec.keep_itl_raw:
        for sample in samples:
            sample.itl_raw = None
    return RunResult(
        spec=spec.to_dict(),
        started_at=started_at,
        finished_at=max(p["finished_at"] for p in parts),
        window=window,
        samples=samples,
        summary=summary,
        timeseries=series,
        validity=validity,
        cancelled=cancelled or any(p["cancelled"] for p in parts),
        stages=ladder,
    )


async def run_sharded(
    spec: WorkloadSpec,
    *,
    on_progress: Callable[[Progress], None] | None,
    cancel_wait: Callable[[], Any] | None,
) -> RunResult:
    shard_specs = split_spec(spec)
    start_at = time.time() + START_MARGIN_S
    latest: list[Progress | None] = [None] * len(shard_specs)
    procs = []
    for shard in shard_specs:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            SHARD_MODULE,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=1 << 30,
        )
        assert proc.stdin is not None
        payload = {"spec": {**shard.to_dict(), "api_key": spec.api_key}, "start_at": start_at}
        proc.stdin.write(json.dumps(payload).encode() + b"\n")
        await proc.stdin.drain()
        proc.stdin.close()
        procs.append(proc)

    reporting = asyncio.Lock()

    async def report(progress: Progress) -> None:
        # As run_workload promises: from a worker thread, never two at once, never on the loop.
        assert on_progress is not None
        async with reporting:
            await asyncio.to_thread(on_progress, progress)

    async def read(i: int) -> dict[str, Any] | None:
        stream = procs[i].stdout
        assert stream is not None
        result: dict[str, Any] | None = None
        async for line in stream:
            message = json.loads(line)
            if "progress" in message:
                latest[i] = Progress(**message["progress"])
                if on_progress is not None and all(latest):
                    await report(_combine([p for p in latest if p is not None]))
            elif "result" in message:
                result = message["result"]
        await procs[i].wait()
        if result is None:
            if cancelled and procs[i].returncode == -signal.SIGTERM:
                return None  # cancelled before it could catch the signal: it sent nothing
            raise RuntimeError(f"load generator shard {i} exited with {procs[i].returncode}")
        return result

    cancelled = False

    async def relay_cancel() -> None:
        nonlocal cancelled
        assert cancel_wait is not None
        await cancel_wait()
        cancelled = True
        for proc in procs:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)

    watcher = asyncio.create_task(relay_cancel()) if cancel_wait is not None else None
    try:
        reported = await asyncio.gather(*(read(i) for i in range(len(procs))))
    finally:
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    parts = [part for part in reported if part is not None] or [_nothing_sent(start_at)]
    result = merge(spec, parts, cancelled)
    if on_progress is not None:
        final = _combine([p for p in latest if p is not None]) if all(latest) else None
        await report(
            Progress(
                100.0,
                final.elapsed_s if final else 0.0,
                result.summary["overall"]["count"],
                result.summary["overall"]["errors"],
                final.current_p99_ttft_s if final else None,
            )
        )
    return result


def _nothing_sent(start_at: float) -> dict[str, Any]:
    """The part of a run whose every shard was cancelled before it started."""
    validity = stats.validity([], loop_lags=[], cpu_s=0.0, wall_s=0.0)
    validity["receive_times"] = "read"
    return {
        "samples": [],
        "window": [start_at, start_at],
        "started_at": start_at,
        "finished_at": time.time(),
        "validity": validity,
        "cancelled": True,
    }


def _combine(progress: list[Progress]) -> Progress:
    p99s = [p.current_p99_ttft_s for p in progress if p.current_p99_ttft_s is not None]
    return Progress(
        percent=min(p.percent for p in progress),
        elapsed_s=max(p.elapsed_s for p in progress),
        requests_done=sum(p.requests_done for p in progress),
        errors=sum(p.errors for p in progress),
        current_p99_ttft_s=max(p99s) if p99s else None,
    )
