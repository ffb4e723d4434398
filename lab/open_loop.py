"""The open-loop client the gateway benchmarks share (lab/bench_gateway.py, bench_hop.py,
bench_admission.py): processes pinned to a core, and streamed chat completions sent on a fixed
schedule, timed to the first token (not the first byte) and to `[DONE]`.

    free_port() -> int
    cpu_seconds(pid) -> float                         utime + stime from /proc
    pinned_process(argv, core, url) -> context        started, pinned, answering; stopped after
    one_request(session, url, body, headers) -> (ttft_s | None, finished)
    open_loop(session, targets, rate, duration) -> {target: figures, "_client": lag}
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab.fast_upstream import CHUNKS, DONE, FIRST_TOKEN
from loadgen import percentile

ROOT = Path(__file__).resolve().parent.parent
KEY = "tgk_bench_0123456789abcdef0123456789abcdef0123456789"
CLK_TCK = os.sysconf("SC_CLK_TCK")
# -- processes -----------------------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def wait_http(url: str, timeout: float = 20.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            httpx.get(url, timeout=1)
            return
        time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer")


@contextlib.contextmanager
def pinned_process(
    argv: list[str], core: int, url: str, cwd: Path = ROOT
) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        os.sched_setaffinity(proc.pid, {core})
        wait_http(url)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- the open-loop client --------------------------------------------------------------------


async def one_request(
    session: Any, url: str, body: bytes, headers: dict[str, str]
) -> tuple[float | None, bool]:
    t0 = time.perf_counter()
    ttft = None
    tail = b""
    try:
        async with session.post(url, data=body, headers=headers) as response:
            if response.status != 200:
                await response.read()
                return None, False
            async for chunk in response.content.iter_any():
                # The first token, not the first byte: vLLM and the simulator send a role-only
                # chunk at once, before the request even reaches a batch.
                if ttft is None and FIRST_TOKEN.search(chunk):
                    ttft = time.perf_counter() - t0
                tail = chunk
    except Exception:
        return None, False
    return ttft, tail.endswith(DONE) or b"[DONE]" in tail


async def open_loop(
    session: Any, targets: list[str], rate: float, duration: float, body: bytes | None = None
) -> dict[str, dict[str, Any]]:
    """Each target gets `rate` req/s on a fixed schedule; targets are interleaved."""
    body = (
        body
        or json.dumps(
            {
                "model": "bench",
                "messages": [{"role": "user", "content": "hello"}],
                "stream": True,
                "max_tokens": CHUNKS,
            }
        ).encode()
    )
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    results: dict[str, list[tuple[float, float | None, bool]]] = {t: [] for t in targets}
    tasks: list[asyncio.Task[None]] = []
    lags: list[float] = []

    async def fire(target: str, sent_at: float) -> None:
        ttft, ok = await one_request(session, target, body, headers)
        results[target].append((sent_at, ttft, ok))

    loop = asyncio.get_running_loop()
    start = loop.time() + 0.05
    step = 1.0 / rate
    n = int(duration * rate)
    schedule = sorted(
        (start + i * step + k * step / len(targets), target)
        for i in range(n)
        for k, target in enumerate(targets)
    )
    for at, target in schedule:
        delay = at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        lags.append(max(0.0, loop.time() - at))
        tasks.append(asyncio.create_task(fire(target, at - start)))
    _, pending = await asyncio.wait(tasks, timeout=2.0)
    for task in pending:
        task.cancel()
    out: dict[str, dict[str, Any]] = {}
    for target, rows in results.items():
        ttfts = [t for _, t, ok in rows if ok and t is not None]
        first = [t for s, t, ok in rows if ok and t is not None and s < duration / 2]
        second = [t for s, t, ok in rows if ok and t is not None and s >= duration / 2]
        out[target] = {
            "sent": n,
            "ok": len(ttfts),
            "errors": sum(1 for _, _, ok in rows if not ok),
            "unfinished": n - len(rows),
            "ttft_p50_ms": percentile(ttfts, 50) * 1000 if ttfts else None,
            "ttft_p99_ms": percentile(ttfts, 99) * 1000 if ttfts else None,
            "ttft_p99_first_half_ms": percentile(first, 99) * 1000 if first else None,
            "ttft_p99_second_half_ms": percentile(second, 99) * 1000 if second else None,
        }
    out["_client"] = {
        "dispatch_lag_p99_ms": percentile(lags, 99) * 1000,
        "max_lag_ms": max(lags) * 1000,
    }
    return out
