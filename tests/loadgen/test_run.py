"""Whole runs against the reference server (a real process with a fixed chunk schedule:
first content chunk 30 ms after arrival, then one every 5 ms)."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import Any

import pytest

from loadgen import Progress, Stage, WorkloadSpec, run_workload

TTFT, ITL = 0.030, 0.005


def spec_for(server: Any, **kw: Any) -> WorkloadSpec:
    values: dict[str, Any] = {
        "base_url": server.base_url,
        "model": "m",
        "max_tokens": 16,
        "prompt_tokens": 32,
    }
    values.update(kw)
    return WorkloadSpec(**values)


async def test_figures_match_the_servers_schedule(refserver: Any) -> None:
    refserver.reset()
    mix = {"online": 0.5, "batch": 0.5}
    result = await run_workload(spec_for(refserver, concurrency=8, requests=48, tier_mix=mix))
    assert len(result.samples) == 48
    assert all(s.ok for s in result.samples), result.samples[0].error
    overall = result.summary["overall"]
    # Loopback and a shared 2-core machine add a little; the schedule sets the floor.
    assert TTFT <= overall["ttft_s"]["p50"] < TTFT + 0.015
    assert ITL * 0.6 < overall["itl_s"]["p50"] < ITL + 0.004
    assert overall["itl_s"]["count"] == 48 * 15
    assert ITL * 0.8 < overall["tpot_s"]["p50"] < ITL + 0.004
    assert all(s.output_tokens == 16 and not s.usage_missing for s in result.samples)
    # 8 streams of ~30 + 15 * 5 = 105 ms each: about 76 requests/s at most (a busy machine
    # can only make it fewer), and the figure is completed requests over the window.
    ideal = 8 / (TTFT + 15 * ITL)
    assert 0 < overall["request_throughput_rps"] <= 1.05 * ideal
    window_s = result.window[1] - result.window[0]
    assert overall["request_throughput_rps"] == pytest.approx(48 / window_s)
    assert overall["output_throughput_tps"] == pytest.approx(overall["request_throughput_rps"] * 16)
    # Response ids and tiers are what the server saw, and its TTFT agrees with ours.
    truth = refserver.ground_truth()
    assert {s.response_id for s in result.samples} == set(truth)
    for s in result.samples:
        record = truth[s.response_id]
        assert record["tier"] == s.tier
        assert s.ttft is not None and s.ttft >= record["server_ttft_s"]
    assert set(result.summary) == {"online", "batch", "overall"}
    assert sum(row["completed"] for row in result.timeseries) == 48
    assert result.validity["usage_missing"] == 0


async def test_cancel_stops_a_long_run_and_keeps_what_completed(refserver: Any) -> None:
    cancel = threading.Event()  # set from the progress callback's thread
    progress: list[Progress] = []

    def on_progress(report: Progress) -> None:
        progress.append(report)
        if report.requests_done > 10:
            cancel.set()

    spec = spec_for(refserver, concurrency=4, duration_s=60)
    started = time.monotonic()
    result = await asyncio.wait_for(
        run_workload(spec, cancel_event=cancel, on_progress=on_progress), timeout=120
    )
    assert time.monotonic() - started < spec.duration_s  # stopped: a run to its end is longer
    assert result.cancelled
    assert len(result.samples) > 10
    assert all(s.ok for s in result.samples)
    assert len(progress) >= 2
    first = next(p for p in progress if p.requests_done > 0)
    assert 0 < first.percent < 100 and first.current_p99_ttft_s is not None
    assert progress[-1].percent == 100.0


async def test_constant_rate_sends_on_schedule(refserver: Any) -> None:
    result = await run_workload(spec_for(refserver, rate=50, arrival="constant", requests=20))
    # The schedule is exact; a busy machine may send late, and says by how much.
    planned = sorted(s.scheduled_time for s in result.samples if s.scheduled_time is not None)
    assert len(planned) == 20
    gaps = [b - a for a, b in itertools.pairwise(planned)]
    assert all(gap == pytest.approx(0.02, abs=1e-6) for gap in gaps), gaps
    for s in result.samples:
        assert s.scheduled_time is not None and s.dispatch_lag >= 0
        assert s.send_time >= s.scheduled_time - 0.001  # never early


async def test_stages_and_warmup(refserver: Any) -> None:
    spec = spec_for(refserver, stages=[Stage(2, 0.6), Stage(6, 0.6)], warmup_s=0.3)
    result = await run_workload(spec)
    warm = [s for s in result.samples if s.warmup]
    measured = [s for s in result.samples if not s.warmup]
    assert warm and measured
    assert all(s.send_time < result.window[0] for s in warm)
    assert result.summary["overall"]["count"] == len(measured)
    per_stage = {0: 0, 1: 0}
    for s in measured:
        per_stage[s.stage] += 1
    # Three times the streams over the same time: clearly more requests in stage 1.
    assert per_stage[1] > 2 * per_stage[0] > 0
    assert result.window[1] - result.window[0] >= 0.9
    # Per-step summaries: the first step's span starts where the warmup ends.
    assert [row["concurrency"] for row in result.stages] == [2, 6]
    assert result.stages[0]["window"][0] == pytest.approx(result.window[0])
    assert result.stages[1]["summary"]["overall"]["count"] == per_stage[1]
    rps = [row["summary"]["overall"]["request_throughput_rps"] for row in result.stages]
    assert rps[1] > 2 * rps[0]


async def test_non_streaming_requests_take_tokens_from_usage(refserver: Any) -> None:
    result = await run_workload(spec_for(refserver, concurrency=2, requests=4, stream=False))
    assert all(s.ok and s.output_tokens == 16 and s.ttft is None for s in result.samples)
    assert result.summary["overall"]["e2e_s"]["p50"] >= TTFT + 15 * ITL


async def test_missing_usage_is_flagged_in_validity(refserver_no_usage: Any) -> None:
    result = await run_workload(spec_for(refserver_no_usage, concurrency=2, requests=4))
    assert all(s.usage_missing and s.output_tokens == 16 for s in result.samples)
    assert any("usage_missing" in f for f in result.validity["flags"])


async def test_http_errors_are_counted_per_request(refserver: Any) -> None:
    spec = spec_for(refserver, concurrency=2, requests=4)
    spec.base_url = refserver.base_url.replace("/v1", "/nope")
    result = await run_workload(spec)
    assert [s.status for s in result.samples] == [404] * 4
    assert all(s.error and s.error.startswith("HTTP 404") for s in result.samples)
    assert result.summary["overall"]["error_rate"] == 1.0
    assert result.summary["overall"]["request_throughput_rps"] == 0


def test_sync_callers_cancel_through_a_threading_event(refserver: Any) -> None:
    # The console's Celery task runs the workload with asyncio.run and cancels from its
    # progress callback (which checks the run's row) by setting a threading.Event.
    stop = threading.Event()
    seen: list[Progress] = []

    def on_progress(progress: Progress) -> None:
        seen.append(progress)
        if progress.requests_done >= 5:
            stop.set()

    spec = spec_for(refserver, concurrency=2, duration_s=60)
    started = time.monotonic()
    result = asyncio.run(run_workload(spec, on_progress=on_progress, cancel_event=stop))
    assert time.monotonic() - started < spec.duration_s  # stopped: a run to its end is longer
    assert result.cancelled and len(result.samples) >= 5
    assert seen[-1].percent == 100.0


async def test_poisson_arrivals_are_seeded_and_average_the_rate(refserver: Any) -> None:
    spec = spec_for(refserver, rate=100, arrival="poisson", requests=30, seed=7, max_tokens=2)
    first = await run_workload(spec)
    gaps = [
        b - a for a, b in itertools.pairwise(sorted(s.scheduled_time or 0 for s in first.samples))
    ]
    # 29 exponential gaps with mean 10 ms: the sample mean lies well within 4-25 ms.
    assert 0.004 < sum(gaps) / len(gaps) < 0.025
    assert len(set(round(g, 4) for g in gaps)) > 20  # not a constant spacing
    again = await run_workload(spec)
    again_gaps = [
        b - a for a, b in itertools.pairwise(sorted(s.scheduled_time or 0 for s in again.samples))
    ]
    assert again_gaps == pytest.approx(gaps, abs=1e-3)


async def test_every_progress_report_comes_from_a_worker_thread(refserver: Any) -> None:
    loop_thread = threading.get_ident()
    seen: list[tuple[int, float]] = []
    spec = WorkloadSpec(
        base_url=refserver.base_url, model="m", concurrency=4, requests=8, max_tokens=4
    )
    await run_workload(spec, on_progress=lambda p: seen.append((threading.get_ident(), p.percent)))
    assert seen and seen[-1][1] == 100.0  # the final report too
    assert all(ident != loop_thread for ident, _ in seen)
