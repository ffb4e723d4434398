"""`--trace FILE`: where a request's time went inside the gateway, one JSON line per request.

Off by default; for diagnosis, as when a client saw a second-long first token and the question
is whether the gateway's loop, its release or the engine spent it. Each finished request
writes (times in milliseconds from its arrival, `null` where it never got there):

    {"id": "tg1f2e-17", "tier": "online", "at": 1764885123.4567, "wait": 0.3,
     "head": 4.1, "first": 52.0, "end": 880.2, "outcome": "ok"}

- `at`: unix time the handler started (request head parsed); `wait`: released by the
  scheduler; `head`: the engine's response head arrived; `first`: the engine's first delta
  reached the gateway (its TTFT); `end`: the engine's stream ended.
- `id` is the request id sent upstream as `x-request-id` (vLLM builds its response id from it,
  so a client's sample pairs with its line).

A collection of Python's garbage collector that took more than `GC_THRESHOLD_S` writes
`{"gc": 2, "took": 0.120, "at": ...}` (its generation; seconds; when it ended): it stops the
loop for that long.

A watcher task also writes `{"lag": 0.214, "at": ...}` whenever the event loop woke more than
`LAG_THRESHOLD_S` late for its 50 ms tick: a stall of the gateway's own loop (or of the
machine), in seconds, ending at `at`.

Lines go to a buffered file (a write per request costs a copy, not a syscall) that is flushed
when the agent stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import time
from pathlib import Path
from typing import IO, Any

LAG_TICK_S = 0.05
LAG_THRESHOLD_S = 0.02
GC_THRESHOLD_S = 0.01


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1e3, 2)


class Trace:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._out: IO[str] = open(path, "a", encoding="utf-8", buffering=1 << 16)  # noqa: SIM115
        self._watcher: asyncio.Task[None] | None = None
        self._gc_started = 0.0

    def request(
        self,
        req_id: str,
        tier: str,
        at: float,
        wait: float | None,
        head: float | None,
        first: float | None,
        end: float | None,
        outcome: str,
    ) -> None:
        """One finished request; `at` is unix seconds, the others seconds after it. Requests
        still finishing after the agent stopped write nothing."""
        if self._out.closed:
            return
        line = {
            "id": req_id,
            "tier": tier,
            "at": round(at, 4),
            "wait": _ms(wait),
            "head": _ms(head),
            "first": _ms(first),
            "end": _ms(end),
            "outcome": outcome,
        }
        self._out.write(json.dumps(line, separators=(",", ":")) + "\n")

    def lag(self, seconds: float, at: float) -> None:
        if not self._out.closed:
            self._out.write(json.dumps({"lag": round(seconds, 4), "at": round(at, 4)}) + "\n")

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
            return
        took = time.perf_counter() - self._gc_started
        if took > GC_THRESHOLD_S and not self._out.closed:
            line = {
                "gc": info.get("generation"),
                "took": round(took, 4),
                "at": round(time.time(), 4),
            }
            self._out.write(json.dumps(line) + "\n")

    def start(self) -> None:
        if self._watcher is None:
            self._watcher = asyncio.create_task(self._watch_loop())
            gc.callbacks.append(self._on_gc)

    async def _watch_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + LAG_TICK_S
            await asyncio.sleep(LAG_TICK_S)
            late = loop.time() - due
            if late > LAG_THRESHOLD_S:
                self.lag(late, time.time())

    async def aclose(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
            self._watcher = None
        self._out.close()


def read_trace(
    path: Path,
) -> tuple[list[dict[str, Any]], list[dict[str, float]], list[dict[str, float]]]:
    """A trace file's request lines, loop-stall lines and gc lines, each in the order written."""
    requests: list[dict[str, Any]] = []
    lags: list[dict[str, float]] = []
    gcs: list[dict[str, float]] = []
    with open(path, encoding="utf-8") as src:
        for text in src:
            if not text.strip():
                continue
            line = json.loads(text)
            if "lag" in line:
                lags.append(line)
            elif "gc" in line:
                gcs.append(line)
            else:
                requests.append(line)
    return requests, lags, gcs
