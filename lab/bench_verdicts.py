"""False-positive rate of benchmark verdicts on A/A pairs (issue 14, part 6). A script.

    .venv/bin/python lab/bench_verdicts.py [--pairs 12] [--repeats 3] [--requests 80]

One simulator with prefix caching on (and a shared prompt prefix, so the cache matters).
Every pair is A/A: both sides are the same workload on the same engine. Runs go as the
console runs them: the prefix cache reset before each run, the prompts salted per run, the
pair's runs interleaved A B A B. For each pair the script takes the console's verdicts
(console.bench.verdicts) on TTFT, TPOT and E2E P50/P99 and request / output throughput:

- over runs: `--repeats` runs a side, the t interval over runs (what a series comparison
  shows; a tier's 8 intervals simultaneous at 95%), with the product's 5% minimum effect,
  without it, and with neither (each metric its own 95% interval);
- provisional: the first run of each side alone (within-run intervals widened by the
  assumed run-to-run spread, 10%; also shown with 20% and with none);
- uncontrolled: two back-to-back runs with the same prompts, no reset and no salt (what the
  console did before), per pair.

A false positive is a "better" or "worse" verdict. Prints JSON lines, then a summary with
Wilson 95% intervals for each rate. All figures are from the simulator.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import secrets
import time
from typing import Any

import httpx
import numpy as np

from console.bench.comparison import METRICS
from console.bench.verdicts import (
    compare_percentile_runs,
    compare_statistic,
    per_metric_confidence,
)
from gpu_agent.sim.testing import run_sim_process
from loadgen import RunResult, WorkloadSpec, run_workload

CLEAR = ("better", "worse")


def one_run(url: str, args: argparse.Namespace, *, salt: str, reset: bool) -> RunResult:
    if reset:
        httpx.post(url + "/reset_prefix_cache").raise_for_status()
    spec = WorkloadSpec(
        base_url=url + "/v1",
        model="aa-model",
        concurrency=args.concurrency,
        requests=args.requests,
        warmup_s=0.3,
        prompt_tokens=256,
        shared_prefix_tokens=128,
        max_tokens=24,
        salt=salt,
    )
    return asyncio.run(run_workload(spec))


def arrays(result: RunResult) -> dict[str, np.ndarray]:
    ok = [s for s in result.samples if s.ok and not s.warmup]
    return {
        field: np.array([getattr(s, field) for s in ok if getattr(s, field) is not None])
        for field in ("ttft", "tpot", "e2e")
    }


def verdicts(
    a: list[RunResult],
    b: list[RunResult],
    min_effect_pct: float,
    run_cv: float = 0.10,
    simultaneous: bool = True,
) -> list[str]:
    va, vb = [arrays(r) for r in a], [arrays(r) for r in b]
    level = per_metric_confidence(len(METRICS) + 2) if simultaneous else 0.95
    out = [
        compare_percentile_runs(
            [x[field] for x in va],
            [x[field] for x in vb],
            q,
            key,
            min_effect_pct=min_effect_pct,
            run_cv=run_cv,
            confidence=level,
        ).verdict
        for key, field, q in METRICS
    ]
    for key in ("request_throughput_rps", "output_throughput_tps"):
        out.append(
            compare_statistic(
                [r.summary["overall"][key] for r in a],
                [r.summary["overall"][key] for r in b],
                key,
                higher_is_better=True,
                min_effect_pct=min_effect_pct,
                confidence=level,
            ).verdict
        )
    return out


def wilson(hits: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    z, p = 1.96, hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def rate(name: str, all_verdicts: list[str]) -> dict[str, Any]:
    decided = [v for v in all_verdicts if v != "not enough data"]
    hits = sum(v in CLEAR for v in decided)
    low, high = wilson(hits, len(decided))
    return {
        "case": name,
        "clear_verdicts": hits,
        "verdicts": len(decided),
        "rate": round(hits / len(decided), 4) if decided else None,
        "wilson95": [round(low, 4), round(high, 4)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--requests", type=int, default=80)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--sim-preset",
        default="llama-8b-h100-80g",
        help="the simulator's hardware (tiny-test: sub-ms steps, so the client's CPU decides)",
    )
    args = parser.parse_args()
    cases: dict[str, list[str]] = {
        "over runs, 5% minimum effect": [],
        "over runs, bare 95% interval": [],
        "over runs, each metric its own 95% interval": [],
        "provisional (one run a side)": [],
        "provisional, assumed run spread 20%": [],
        "provisional, no assumed run spread": [],
        "uncontrolled (no reset, no salt)": [],
    }
    started = time.time()
    flags = ("--max-num-seqs", "16", "--enable-prefix-caching")
    with run_sim_process("aa-model", flags, preset=args.sim_preset) as url:
        for pair in range(args.pairs):
            side_a, side_b = [], []
            for _ in range(args.repeats):  # interleaved A B A B
                side_a.append(one_run(url, args, salt=f"run-{secrets.token_hex(4)}", reset=True))
                side_b.append(one_run(url, args, salt=f"run-{secrets.token_hex(4)}", reset=True))
            first = one_run(url, args, salt="", reset=False)
            second = one_run(url, args, salt="", reset=False)
            results = {
                "over runs, 5% minimum effect": verdicts(side_a, side_b, 5.0),
                "over runs, bare 95% interval": verdicts(side_a, side_b, 0.0),
                "over runs, each metric its own 95% interval": verdicts(
                    side_a, side_b, 0.0, simultaneous=False
                ),
                "provisional (one run a side)": verdicts(side_a[:1], side_b[:1], 5.0),
                "provisional, assumed run spread 20%": verdicts(
                    side_a[:1], side_b[:1], 5.0, run_cv=0.20
                ),
                "provisional, no assumed run spread": verdicts(
                    side_a[:1], side_b[:1], 5.0, run_cv=0.0
                ),
                "uncontrolled (no reset, no salt)": verdicts([first], [second], 5.0),
            }
            for name, found in results.items():
                cases[name].extend(found)
            print(json.dumps({"pair": pair, **results}), flush=True)
    for name, found in cases.items():
        print(json.dumps({"simulated": True, **rate(name, found)}))
    print(
        json.dumps({"pairs": args.pairs, "repeats": args.repeats, "wall_s": time.time() - started})
    )


if __name__ == "__main__":
    main()
