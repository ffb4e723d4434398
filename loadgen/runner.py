"""The asyncio shell: schedules requests by the spec, watches the client's own health."""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections import deque
from collections.abc import Callable

from loadgen import stats
from loadgen.client import (
    endpoint_url,
    request_headers,
    send_request,
)
from loadgen.percentiles import percentile
from loadgen.pool import Pool
from loadgen.prompts import RequestFactory
from loadgen.spec import WorkloadSpec
from loadgen.types import Progress, RequestSample, RunResult

LOOP_TICK_S = 0.010
PROGRESS_INTERVAL_S = 0.5
RECENT_TTFT = 1000  # completed requests the live P99 looks back over

CANCEL_POLL_S = 0.05

ProgressCallback = Callable[[Progress], None]
CancelEvent = asyncio.Event | threading.Event


async def wait_for_cancel(event: CancelEvent) -> None:
    if isinstance(event, asyncio.Event):
        await event.wait()
        return
    # A threading.Event, set from another thread (a Celery task's revoke handler, say): it
    # cannot wake the loop, so poll it; 50 ms is plenty for a cancel button.
    while not event.is_set():
        await asyncio.sleep(CANCEL_POLL_S)


class _Run:
    def __init__(self, spec: WorkloadSpec, cancel_event: CancelEvent | None) -> None:
        self.spec = spec
        self.cancel_event = cancel_event
        self.factory = RequestFactory(spec)
        self.url = endpoint_url(spec.base_url, spec.endpoint)
        self.headers = request_headers(spec.api_key)
        self.t0 = time.perf_counter()
        self.t0_unix = time.time()
        self.warmup_end = self.t0 + spec.warmup_s
        if spec.stages:
            self.deadline: float | None = self.t0 + spec.total_stage_s
        elif spec.duration_s is not None:
            self.deadline = self.warmup_end + spec.duration_s
        else:
            self.deadline = None
        self.stage = 0
        self.active = spec.stages[0].concurrency if spec.stages else spec.concurrency or 0
        self.stage_changed = asyncio.Event()
        self.stopping = False
        self.cancelled = False
        self.next_index = 0
        self.measured_dispatched = 0
        self.samples: list[RequestSample] = []
        self.done_measured = 0
        self.errors = 0
        self.recent_ttft: deque[float] = deque(maxlen=RECENT_TTFT)
        self.loop_lags: list[float] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self.pool = Pool()
        self.main_task: asyncio.Task[None] | None = None

    def unix(self, perf: float) -> float:
        return self.t0_unix + (perf - self.t0)

    def claim(self) -> tuple[int, bool] | None:
        """The next request's index and whether it is warmup, or None when the run is over."""
        now = time.perf_counter()
        if self.stopping or (self.deadline is not None and now >= self.deadline):
            return None
        warm = now < self.warmup_end
        if not warm and self.spec.requests is not None:
            if self.measured_dispatched >= self.spec.requests:
                return None
            self.measured_dispatched += 1
        index = self.next_index
        self.next_index += 1
        return index, warm

    async def one(self, index: int, warm: bool, scheduled: float) -> None:
        planned = self.factory.make(index)
        stage = self.stage
        lag = time.perf_counter() - scheduled
        try:
            sample = await send_request(
                self.pool,
                self.url,
                self.headers,
                planned,
                tier_header=self.spec.tier_header,
                stream=self.spec.stream,
                chat=self.spec.endpoint == "chat",
                timeout_s=self.spec.timeout_s,
            )
        except Exception as exc:  # a bug must cost one sample, not a worker and its slot
            sample = RequestSample(index=planned.index, send_time=time.time(), tier=planned.tier)
            sample.error = f"client error: {type(exc).__name__}: {exc}"[:500]
        sample.stage, sample.warmup = stage, warm
        sample.scheduled_time = self.unix(scheduled)
        sample.dispatch_lag += max(lag, 0.0)
        self.samples.append(sample)
        if not warm:
            self.done_measured += 1
            if sample.ok and sample.ttft is not None:
                self.recent_ttft.append(sample.ttft)
            elif not sample.ok:
                self.errors += 1

    async def worker(self, slot: int) -> None:
        scheduled = time.perf_counter()
        while not self.stopping:
            if slot >= self.active:
                changed = self.stage_changed
                await changed.wait()
                scheduled = time.perf_counter()
                continue
            claimed = self.claim()
            if claimed is None:
                return
            await self.one(*claimed, scheduled)
            scheduled = time.perf_counter()

    async def stage_controller(self) -> None:
        boundary = self.t0
        for i, stage in enumerate(self.spec.stages):
            if i:
                self.stage, self.active = i, stage.concurrency
                self._wake_workers()
            boundary += stage.duration_s
            await asyncio.sleep(max(boundary - time.perf_counter(), 0))
        self.stopping = True
        self._wake_workers()

    def _wake_workers(self) -> None:
        self.stage_changed.set()
        self.stage_changed = asyncio.Event()

    async def rate_dispatcher(self) -> None:
        rate = self.spec.rate or 1.0
        rng = random.Random(f"arrival:{self.spec.seed}")
        next_at = time.perf_counter()
        while True:
            delay = next_at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            claimed = self.claim()
            if claimed is None:
                return
            task = asyncio.create_task(self.one(*claimed, next_at))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            gap = rng.expovariate(rate) if self.spec.arrival == "poisson" else 1.0 / rate
            next_at += gap

    async def loop_ticker(self) -> None:
        while True:
            expected = time.perf_counter() + LOOP_TICK_S
            await asyncio.sleep(LOOP_TICK_S)
            now = time.perf_counter()
            if now >= self.warmup_end:
                self.loop_lags.append(max(now - expected, 0.0))

    async def cancel_watcher(self) -> None:
        assert self.cancel_event is not None
        await wait_for_cancel(self.cancel_event)
        self.cancelled = self.stopping = True
        self._wake_workers()
        for task in [*self.tasks, self.main_task]:
            if task is not None:
                task.cancel()

    def progress(self) -> Progress:
        now = time.perf_counter()
        elapsed = now - self.t0
        if self.spec.requests is not None and self.deadline is None:
            percent = 100.0 * self.done_measured / self.spec.requests
        elif self.deadline is not None:
            percent = 100.0 * elapsed / max(self.deadline - self.t0, 1e-9)
        else:
            percent = 0.0
        p99 = percentile(self.recent_ttft, 99) if self.recent_ttft else None
        return Progress(min(percent, 99.9), elapsed, self.done_measured, self.errors, p99)

    async def progress_reporter(self, callback: ProgressCallback) -> None:
        # The callback runs in a thread so a slow one (a database write) cannot stall the
        # event loop and distort the latencies being measured.
        while True:
            await asyncio.sleep(PROGRESS_INTERVAL_S)
            await asyncio.to_thread(callback, self.progress())


async def run_workload(
    spec: WorkloadSpec,
    *,
    on_progress: ProgressCallback | None = None,
    cancel_event: CancelEvent | None = None,
) -> RunResult:
    """Run the workload and return its samples, summaries and validity checks."""
    if spec.processes > 1:
        from loadgen.shards import run_sharded

        event = cancel_event
        return await run_sharded(
            spec,
            on_progress=on_progress,
            cancel_wait=(lambda: wait_for_cancel(event)) if event is not None else None,
        )
    run = _Run(spec, cancel_event)
    cpu0 = time.process_time()
    started_at = run.t0_unix
    helpers = [asyncio.create_task(run.loop_ticker())]
    if cancel_event is not None:
        helpers.append(asyncio.create_task(run.cancel_watcher()))
    if on_progress is not None:
        helpers.append(asyncio.create_task(run.progress_reporter(on_progress)))
    try:
        main: asyncio.Task[None]
        if spec.rate is not None:
            main = asyncio.create_task(run.rate_dispatcher())
        else:
            for slot in range(spec.max_concurrency):
                task = asyncio.create_task(run.worker(slot))
                run.tasks.add(task)
                task.add_done_callback(run.tasks.discard)
            main = asyncio.create_task(run.stage_controller() if spec.stages else asyncio.sleep(0))
        run.main_task = main
        await asyncio.gather(main, return_exceptions=True)
        # Let requests in flight finish (the per-request timeout bounds this).
        while run.tasks:
            await asyncio.gather(*list(run.tasks), return_exceptions=True)
    finally:
        run.pool.close()
        for task in helpers:
            task.cancel()
        for task in helpers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
    finished = time.perf_counter()
    window = _measured_window(run)
    result_samples = sorted(run.samples, key=lambda s: s.index)
    summary, series, ladder = stats.run_figures(spec, result_samples, started_at, window)
    validity = stats.validity(
        result_samples,
        loop_lags=run.loop_lags,
        cpu_s=time.process_time() - cpu0,
        wall_s=finished - run.t0,
    )
    # How chunk arrival was timed: the kernel's receive stamps, or the loop's read (no Linux).
    validity["receive_times"] = "kernel" if run.pool.kernel_stamps else "read"
    validity["clock_steps"] = run.pool.clock.steps  # wake-ups timed by the read (receive.py)
    validity["untrusted"] = stats.untrusted(validity)
    if not spec.keep_itl_raw:
        for sample in result_samples:
            sample.itl_raw = None
    if on_progress is not None:
        final = run.progress()
        done = Progress(
            100.0, final.elapsed_s, final.requests_done, final.errors, final.current_p99_ttft_s
        )
        await asyncio.to_thread(on_progress, done)  # like every report: from a worker thread
    return RunResult(
        spec=spec.to_dict(),
        started_at=started_at,
        finished_at=run.unix(finished),
        window=window,
        samples=result_samples,
        summary=summary,
        timeseries=series,
        validity=validity,
        cancelled=run.cancelled,
        stages=ladder,
    )


def _measured_window(run: _Run) -> tuple[float, float]:
    start = run.unix(run.warmup_end)
    ends = [s.end_time for s in run.samples if not s.warmup]
    end = max(ends) if ends else start
    if run.deadline is not None and not run.cancelled:
        end = max(end, run.unix(run.deadline))
    return (start, end)
