"""The asyncio shell around the step model: one task runs steps against the wall clock.

Each step is slept for its modelled duration x time scale, measured to an absolute deadline
that chains from the previous step's deadline: the CPU spent scheduling and delivering tokens
is absorbed rather than added, so modelled and wall step times agree on average. Tokens of a
step are delivered at its deadline, to one asyncio queue per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from gpu_agent.sim.config import SimConfig
from gpu_agent.sim.engine import Engine, FinishReason, SimRequest, StepResult
from gpu_agent.sim.metrics import SimMetrics

# A loop late by more than this (the machine stalled it) resynchronises to the wall clock
# instead of racing through a backlog of deadlines; below it, later steps catch up.
MAX_LAG_S = 0.25
UTIL_WINDOW_S = 1.0
MAX_RECORDS = 50_000

_SPENT_RNG = random.Random(0)
Delivery = tuple[list[int], str | None]  # new token ids, finish reason when finished


@dataclass(eq=False)
class Tracked:
    """Server-side view of one request; wall times are unix seconds (time.time())."""

    request: SimRequest
    response_id: str
    queue: asyncio.Queue[Delivery] = field(default_factory=asyncio.Queue)
    arrival_time: float = field(default_factory=time.time)
    first_token_time: float | None = None
    # The wire-level ground truth a client is checked against: when the request's last bytes
    # reached the server (the kernel's receive time with --sim-wire-timestamps, else when the
    # handler started) and when the first content chunk was written to the socket.
    received_time: float | None = None
    first_token_sent_time: float | None = None
    last_token_time: float | None = None
    finish_time: float | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0

    def __post_init__(self) -> None:
        self.prompt_tokens = len(self.request.prompt_token_ids)

    def record(self) -> dict[str, Any]:
        request = self.request
        return {
            "id": self.response_id,
            "request_id": request.request_id,
            "arrival_time": self.arrival_time,
            "first_token_time": self.first_token_time,
            "received_time": self.received_time,
            "first_token_sent_time": self.first_token_sent_time,
            "finish_time": self.finish_time,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "cached_prompt_tokens": request.num_cached_prompt_tokens,
            "priority": request.priority,
            "preemptions": request.num_preemptions,
            "finish_reason": request.finish_reason.value if request.finish_reason else None,
        }


class EngineRunner:
    def __init__(self, config: SimConfig, metrics: SimMetrics) -> None:
        self.config = config
        self.metrics = metrics
        self.engine = Engine(config)
        self.scale = config.time_scale
        self.records: deque[Tracked] = deque(maxlen=MAX_RECORDS)
        self._tracked: dict[SimRequest, Tracked] = {}
        self._ids = itertools.count()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # (wall start, wall end) of modelled forward passes, for the utilisation figure.
        self._busy: deque[tuple[float, float]] = deque()
        # Back-to-back steps only: sums of modelled (scaled) and measured wall durations.
        self.timed_steps = 0
        self.modelled_s = 0.0
        self.measured_s = 0.0
        self.late_s = 0.0  # delivery after the deadline (timer slack, busy loop)
        self._clock0 = time.monotonic()

    def next_request_id(self) -> str:
        return f"sim-{next(self._ids)}"

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run(), name="sim-engine")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _model_now(self) -> float:
        return (time.monotonic() - self._clock0) / self.scale

    def submit(self, tracked: Tracked) -> None:
        # Idle time passes on the model clock too, so arrival order matches the wall clock.
        self.engine.now = max(self.engine.now, self._model_now())
        self.engine.add_request(tracked.request)
        self._tracked[tracked.request] = tracked
        self.records.append(tracked)
        self._update_gauges()
        self._wake.set()

    def abort(self, tracked: Tracked) -> None:
        request = tracked.request
        if request.finish_reason is None:
            self.engine.abort(request)
            self._finish(tracked, time.time())
            self._update_gauges()

    # -- the loop -------------------------------------------------------------------------

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        deadline: float | None = None  # when the previous step's tokens were due
        woke = 0.0  # when they were actually delivered
        while True:
            if not self.engine.has_work():
                self._wake.clear()
                await self._wake.wait()
                deadline = None
            now = loop.time()
            back_to_back = deadline is not None and now - deadline < MAX_LAG_S
            start = deadline if back_to_back and deadline is not None else now
            self.engine.now = max(self.engine.now, self._model_now())
            result = self.engine.step()
            if result is None:
                deadline = None
                await asyncio.sleep(0)
                continue
            modelled = result.duration * self.scale
            step_deadline = start + modelled
            delay = step_deadline - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            previous_woke, woke = woke, loop.time()
            if back_to_back:
                # Step time as a client sees it: from one delivery to the next.
                self.timed_steps += 1
                self.modelled_s += modelled
                self.measured_s += woke - previous_woke
                self.late_s += woke - step_deadline
            deadline = step_deadline
            self._note_busy(result, start, loop)
            self._deliver(result)

    def _note_busy(self, result: StepResult, start: float, loop: asyncio.AbstractEventLoop) -> None:
        # Convert the loop clock to unix time once per step for the utilisation window.
        offset = time.time() - loop.time()
        gap = 0.0 if self.config.async_scheduling else self.config.hardware.cpu_gap_s
        forward_start = start + gap * self.scale + offset
        self._busy.append((forward_start, forward_start + result.forward * self.scale))
        horizon = time.time() - UTIL_WINDOW_S
        while self._busy and self._busy[0][1] < horizon:
            self._busy.popleft()

    def _deliver(self, result: StepResult) -> None:
        metrics = self.metrics
        wall = time.time()
        tracked_by_request = self._tracked
        generated = 0
        for request, token_ids in result.outputs:
            tracked = tracked_by_request.get(request)
            if tracked is None:
                continue
            generated += len(token_ids)
            tracked.output_tokens += len(token_ids)
            if tracked.first_token_time is None:
                tracked.first_token_time = wall
                metrics.ttft.observe(wall - tracked.arrival_time)
                metrics.prompt_tokens.inc(tracked.prompt_tokens)
                if request.first_scheduled_time is not None:
                    queued = (request.first_scheduled_time - request.arrival_time) * self.scale
                    metrics.queue_time.observe(queued)
            elif tracked.last_token_time is not None:
                metrics.itl.observe(wall - tracked.last_token_time)
            tracked.last_token_time = wall
            reason = request.finish_reason
            tracked.queue.put_nowait((token_ids, reason.value if reason else None))
        metrics.generation_tokens.inc(generated)
        metrics.iteration_tokens.observe(result.num_prefill_tokens + generated)
        for request in result.finished:
            tracked = tracked_by_request.get(request)
            if tracked is not None:
                self._finish(tracked, wall)
        self._update_gauges()

    def _finish(self, tracked: Tracked, wall: float) -> None:
        tracked.finish_time = wall
        self._tracked.pop(tracked.request, None)
        reason = tracked.request.finish_reason or FinishReason.ABORT
        self.metrics.success[reason.value].inc()
        self.metrics.e2e.observe(wall - tracked.arrival_time)
        # Records are kept long after the request: drop what only the engine needed.
        request = tracked.request
        request.prompt_token_ids, request.output_token_ids, request.block_hashes = [], [], []
        request.rng = _SPENT_RNG

    def _update_gauges(self) -> None:
        engine = self.engine
        self.metrics.running.set(len(engine.running))
        self.metrics.waiting.set(len(engine.waiting))
        self.metrics.kv_usage.set(engine.kv.usage)
        self.metrics.sync_engine_totals(engine.kv.queries, engine.kv.hits, engine.num_preemptions)

    # -- figures for /sim/v1/* ----------------------------------------------------------------

    def gpu(self) -> dict[str, Any]:
        now = time.time()
        horizon = now - UTIL_WINDOW_S
        busy = sum(max(0.0, min(end, now) - max(start, horizon)) for start, end in self._busy)
        hardware = self.config.hardware
        kv_used = self.engine.kv.num_blocks - self.engine.kv.num_free_blocks
        kv_bytes = kv_used * self.config.block_size * hardware.kv_bytes_per_token
        return {
            "name": f"simulated {self.config.preset}",
            "simulated": True,
            "util": min(1.0, busy / UTIL_WINDOW_S),
            "mem_used_bytes": hardware.weight_bytes + kv_bytes,
            "mem_total_bytes": hardware.gpu_memory_bytes,
            "kv_cache_usage": self.engine.kv.usage,
            "num_requests_running": len(self.engine.running),
            "num_requests_waiting": len(self.engine.waiting),
            "steps": {
                "timed": self.timed_steps,
                "modelled_s": self.modelled_s,
                "measured_s": self.measured_s,
                "late_s": self.late_s,
                "total": self.engine.num_steps,
            },
        }

    def requests_since(self, since: float) -> list[dict[str, Any]]:
        return [t.record() for t in self.records if t.arrival_time >= since]
