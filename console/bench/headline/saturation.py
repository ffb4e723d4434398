"""Where the engine saturates, found before the experiment's arms run (the offered load is a
multiple of it).

A short closed-loop probe (concurrency 2 x max_num_seqs) gives a first throughput estimate;
then Poisson steps straight to the FCFS engine, 10% apart, each a few seconds, until the engine
stops keeping up (requests finished per second inside the window below 90% of those sent per
second, or TTFT P50 past 4x the first step's and 100 ms: the queue is growing). The saturation
throughput is the highest finishing rate any step achieved.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from console.bench.headline.arms import ArmOutcome, Setup, run_arm
from console.bench.headline.catalog import Arm

Log = Callable[[str], None]


def _overall(outcome: ArmOutcome) -> dict[str, Any]:
    return outcome.tier_row("overall")


@dataclass
class SweepStep:
    rate: float
    sent_rps: float
    achieved_rps: float
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None


def find_saturation(
    setup: Setup,
    *,
    step_s: float = 10.0,
    probe_s: float = 8.0,
    log: Log = print,
    sweep: bool = True,
) -> dict[str, Any]:
    """Sweep Poisson rates against the FCFS engine; see the module docstring. Without `sweep`
    (a real engine, minutes per start), the closed-loop probe's rate is the answer."""
    direct = Arm("s", "sweep", "engine direct, fcfs (saturation sweep)", "fcfs")
    # 64 streams: twice the simulated engine's max_num_seqs, four times vLLM's (16).
    probe = run_arm(direct, setup, duration_s=probe_s, concurrency=64)
    estimate = max(probe.done_in_window_rps(), 1.0)
    log(f"saturation: closed-loop probe (64 streams, {probe_s:g} s): {estimate:.2f} req/s")
    steps: list[SweepStep] = []
    rate = 0.9 * estimate
    if not sweep:
        return {
            "closed_loop_estimate_rps": estimate,
            "steps": [],
            "saturation_rps": estimate,
            "knee_offered_rps": None,
        }
    for _ in range(8):
        step_setup = dataclasses.replace(setup, rate=rate, warmup_s=min(setup.warmup_s, 2.0))
        out = run_arm(direct, step_setup, duration_s=step_s)
        row = _overall(out)
        measured = [s for s in out.result.samples if not s.warmup]
        sent = len(measured) / step_s  # the Poisson draw, not the nominal rate
        step = SweepStep(
            rate, sent, out.done_in_window_rps(),
            row["ttft_p50_ms"], row["ttft_p99_ms"],
        )  # fmt: skip
        steps.append(step)
        log(
            f"saturation: {rate:6.2f} req/s offered, {sent:6.2f} sent, "
            f"{step.achieved_rps:6.2f} done/s, TTFT P50 {step.ttft_p50_ms or 0:7.0f} ms"
        )
        first_p50 = steps[0].ttft_p50_ms or 0.0
        # 0.9, not 1.0: a 10 s window of Poisson arrivals finishes a few percent fewer than
        # it sends even far from saturation (requests in flight at the end).
        growing = step.achieved_rps < 0.9 * sent or (
            (step.ttft_p50_ms or 0.0) > max(4 * first_p50, 100.0)
        )
        if growing:
            break
        rate *= 1.1
    saturation = max(s.achieved_rps for s in steps)
    return {
        "closed_loop_estimate_rps": estimate,
        "steps": [dataclasses.asdict(s) for s in steps],
        "saturation_rps": saturation,
        "knee_offered_rps": steps[-1].rate,
    }
