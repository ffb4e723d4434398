"""Runs written straight into the database for the decision tests: three tiers of synthetic
requests whose latencies, pacing and failures are chosen, with a summary computed by the load
generator's own summarize(), as a finished task would leave them."""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.bench.conftest import TIER_CONFIG

TIERS = ("online", "batch", "offline")
# The gateway's answer to a request it shed for a full queue (loadgen.stats.is_shed).
SHED_BODY = '{"error": {"message": "the online queue is full", "code": "queue_full"}}'


def fill_run(
    run: Any,
    *,
    ttft: dict[str, float],
    spacing_s: float = 0.01,
    n: int = 600,
    tpot: float = 0.010,
    seed: int = 0,
    shed_share: float = 0.0,
    validity: dict[str, Any] | None = None,
    status: str = "succeeded",
) -> Any:
    """Give `run` n samples: tier i % 3, TTFT exponential around `ttft[tier]` (seconds), sent
    every `spacing_s` (throughput follows), a `shed_share` of them refused with 429."""
    from console.bench.models import RequestSample
    from loadgen import summarize

    rng = np.random.default_rng(seed)
    samples = []
    for i in range(n):
        tier = TIERS[i % 3]
        shed = rng.random() < shed_share
        first = float(rng.exponential(ttft[tier])) + 0.005
        samples.append(
            RequestSample(
                run=run,
                index=i,
                tier=tier,
                send_time=1000.0 + i * spacing_s,
                ttft=None if shed else first,
                tpot=None if shed else tpot,
                e2e=None if shed else first + 19 * tpot,
                prompt_tokens=32,
                output_tokens=None if shed else 20,
                itl_count=0 if shed else 19,
                itl_mean=None if shed else tpot,
                itl_p99=None if shed else tpot * 2,
                status=429 if shed else 200,
                error=SHED_BODY if shed else "",
            )
        )
    RequestSample.objects.bulk_create(samples)
    # The measured window ends a beat after the last send, as a duration-bound run's does (a
    # window to the last completion would make throughput hang on one slow request).
    end = 1000.0 + n * spacing_s + 0.3 + float(rng.uniform(0.0, 0.2))
    run.summary = summarize([s.to_loadgen() for s in samples], (1000.0, end))
    run.validity = validity or {"flags": [], "untrusted": {}}
    run.status = status
    run.save(update_fields=["summary", "validity", "status"])
    return run


def new_run(endpoint: Any, *, max_in_flight: int = 24, label: str = "", **fill: Any) -> Any:
    """A finished run against `endpoint` whose snapshot names tier config "tiers" with the
    given admission cap (its version: 1 for 24, 2 otherwise)."""
    from console.bench.models import BenchmarkRun

    config = {**TIER_CONFIG, "scheduler": {**TIER_CONFIG["scheduler"]}}
    config["scheduler"]["admission"] = {"max_in_flight": max_in_flight}
    run = BenchmarkRun.objects.create(
        endpoint=endpoint,
        model="m1",
        label=label,
        workload={"concurrency": 24, "requests": 600},
        config_snapshot={
            "nodes": [
                {
                    "id": None,
                    "name": "n1",
                    "tier_config": {
                        "name": "tiers",
                        "version": 1 if max_in_flight == 24 else 2,
                        "config": config,
                    },
                    "launch_profile": {"name": "engine", "version": 1, "args": {}},
                }
            ]
        },
    )
    return fill_run(run, **fill) if fill else run


# The regression (admission.max_in_flight 12 against 24 clients): online TTFT P99 up
# but noisy, offline TTFT P99 194 -> ~6,900 ms, throughput -36%; TPOT a little better.
BEFORE = {"ttft": {"online": 0.060, "batch": 0.080, "offline": 0.042}, "spacing_s": 0.010}
AFTER = {
    "ttft": {"online": 0.100, "batch": 0.090, "offline": 1.5},
    "spacing_s": 0.0156,
    "tpot": 0.008,
}


def regression_series(endpoint: Any, runs: int = 3) -> tuple[Any, Any]:
    """Two series of `runs` runs each (A: cap 24, B: cap 12), as interleaved repeats leave
    them; the online TTFT of each run swings by a run-to-run factor."""
    from console.bench.models import RunSeries

    rng = np.random.default_rng(11)
    side_a = RunSeries.objects.create(repeats=runs, label="pair: side A")
    side_b = RunSeries.objects.create(repeats=runs, label="pair: side B", side="B")
    side_a.partner, side_b.partner = side_b, side_a
    for i in range(runs):
        for series, spec, cap in ((side_a, BEFORE, 24), (side_b, AFTER, 12)):
            swing = float(rng.lognormal(0.0, 0.35))
            ttft = {**spec["ttft"], "online": spec["ttft"]["online"] * swing}
            run = new_run(endpoint, max_in_flight=cap, seed=100 * i + cap, **{**spec, "ttft": ttft})
            run.series = series
            run.save(update_fields=["series"])
            if series.template_id is None:
                series.template = run
    side_a.save()
    side_b.save()
    return side_a, side_b
