"""One workload split over several client processes."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from loadgen import Progress, Stage, WorkloadSpec, run_workload
from loadgen.shards import split_spec


def spec(**kw: Any) -> WorkloadSpec:
    values: dict[str, Any] = {
        "base_url": "http://x/v1",
        "model": "m",
        "max_tokens": 16,
        "prompt_tokens": 32,
    }
    values.update(kw)
    return WorkloadSpec(**values)


def test_streams_requests_and_rate_are_shared_out() -> None:
    parts = split_spec(spec(concurrency=10, requests=20, processes=3))
    assert [p.concurrency for p in parts] == [4, 3, 3]
    assert [p.requests for p in parts] == [7, 7, 6]
    assert len({p.seed for p in parts}) == 3
    assert all(p.processes == 1 and p.keep_itl_raw for p in parts)
    rated = split_spec(spec(rate=30.0, duration_s=5, processes=3))
    assert [p.rate for p in rated] == [10.0, 10.0, 10.0]
    laddered = split_spec(spec(stages=[Stage(4, 1), Stage(9, 1)], processes=2))
    assert [[s.concurrency for s in p.stages] for p in laddered] == [[2, 5], [2, 4]]


def test_never_more_processes_than_streams() -> None:
    assert len(split_spec(spec(concurrency=2, requests=50, processes=8))) == 2
    assert len(split_spec(spec(concurrency=8, requests=3, processes=8))) == 3


async def test_a_split_run_merges_into_one_result(refserver: Any) -> None:
    refserver.reset()
    progress: list[Progress] = []
    result = await run_workload(
        spec(
            base_url=refserver.base_url,
            concurrency=4,
            requests=12,
            processes=2,
            tier_mix={"online": 1.0},
        ),
        on_progress=progress.append,
    )
    assert len(result.samples) == 12
    assert [s.index for s in result.samples] == list(range(12))
    assert all(s.ok and s.itl_raw is None for s in result.samples)
    truth = refserver.ground_truth()
    assert {s.response_id for s in result.samples} == set(truth)
    assert result.summary["overall"]["count"] == 12
    assert result.summary["overall"]["itl_s"]["count"] == 12 * 15
    assert result.validity["processes"] == 2
    assert result.validity["receive_times"] == "kernel"
    assert progress[-1].percent == 100.0


async def test_cancel_reaches_every_process(refserver: Any) -> None:
    cancel = threading.Event()  # set from the progress callback's thread

    def on_progress(progress: Progress) -> None:
        if progress.requests_done > 0:  # every shard is running (progress is combined)
            cancel.set()

    started = time.monotonic()
    result = await asyncio.wait_for(
        run_workload(
            spec(base_url=refserver.base_url, concurrency=4, duration_s=60, processes=2),
            on_progress=on_progress,
            cancel_event=cancel,
        ),
        timeout=120,
    )
    assert time.monotonic() - started < 60  # stopped: a run to its end takes longer
    assert result.cancelled and result.samples


async def test_a_cancel_before_the_shards_start_ends_the_run_cancelled(refserver: Any) -> None:
    cancel = asyncio.Event()
    cancel.set()  # the shards get SIGTERM before they can have set up their handler
    result = await asyncio.wait_for(
        run_workload(
            spec(base_url=refserver.base_url, concurrency=4, duration_s=60, processes=2),
            cancel_event=cancel,
        ),
        timeout=60,
    )
    assert result.cancelled
    assert result.summary["overall"]["count"] == len(result.samples)
