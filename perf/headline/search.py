"""The two searches the experiment does before its arms: where the engine saturates, and the
best tier config for this workload.

Saturation (`find_saturation`): a short closed-loop probe (concurrency 2 x max_num_seqs)
gives a first throughput estimate; then Poisson steps straight to the FCFS engine, 10% apart,
each a few seconds, until the engine stops keeping up (requests finished per second inside the
window below 90% of those sent per second, or TTFT P50 past 4x the first step's and 100 ms: the
queue is growing). The saturation throughput is the highest finishing rate any step achieved.

Tier config (`search_tier_config`): coordinate descent from seed 000's config, one variable at
a time (the seed's own rule: change one thing per benchmark), each trial a short run of the
arms' workload through the gateway. A trial's score is online TTFT P99; a trial only counts if
its requests finished per second inside the window are at least `THROUGHPUT_FLOOR` x the best
seen so far, nothing was rejected, and the batch and offline TTFT P99 stay within
`TIER_COST_CAP` x the seed config's: the winner cannot buy online latency with lost work or by
parking the whole backlog on one tier.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from perf.headline.arms import Arm, ArmOutcome, Setup, run_arm
from perf.headline.workload import SEED_TIER_CONFIG, TIERS, with_admission, with_waits

THROUGHPUT_FLOOR = 0.97
TIER_COST_CAP = 1.5
INF = float("inf")
Log = Callable[[str], None]
Transform = Callable[[dict[str, Any]], dict[str, Any]]


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


def candidate_axes() -> list[tuple[str, list[tuple[str, Transform]]]]:
    """The coordinates searched, in order, each with its values (label, config transform)."""

    def adm(**kw: Any) -> Transform:
        return lambda cfg: with_admission(cfg, **kw)

    def reserve(n: int) -> Transform:
        # Reserved slots come off max_in_flight: without a cap near the engine's max_num_seqs
        # (32 here) they would reserve slots the engine never runs at once anyway.
        def transform(cfg: dict[str, Any]) -> dict[str, Any]:
            cap = cfg["scheduler"].get("admission", {}).get("max_in_flight") or 32
            return with_admission(cfg, max_in_flight=cap, reserved_slots=n)

        return transform

    def waits(online: int, batch: int, offline: int) -> Transform:
        return lambda cfg: with_waits(cfg, {"online": online, "batch": batch, "offline": offline})

    return [
        (
            "max_awaiting_first_token",
            [(str(n), adm(max_awaiting_first_token=n)) for n in (1, 2, 8)],
        ),
        ("max_in_flight", [(str(n), adm(max_in_flight=n)) for n in (32, 24)]),
        ("reserved_slots", [(str(n), reserve(n)) for n in (4, 8)]),
        ("waits", [("2/10/50 ms", waits(2, 10, 50)), ("1/1/1 ms", waits(1, 1, 1))]),
    ]


def search_tier_config(
    setup: Setup, *, policy: str, trial_s: float, log: Log = print
) -> dict[str, Any]:
    """Coordinate descent over admission settings and waits; returns the best config and
    every trial."""
    trials: list[dict[str, Any]] = []

    def trial(label: str, cfg: dict[str, Any]) -> dict[str, Any]:
        arm = Arm("t", f"trial-{len(trials)}", label, policy, cfg)
        out = run_arm(arm, setup, duration_s=trial_s)
        overall = out.tier_row("overall")
        record = {
            "label": label,
            "config": cfg,
            **{f"{t}_ttft_p99_ms": out.tier_row(t)["ttft_p99_ms"] or INF for t in TIERS},
            # The engine's delivery rate inside the window: the loadgen's own figure also
            # counts the drain after the deadline, which in a short trial is mostly how long
            # the last offline request waited, not how much work the engine did.
            "done_in_window_rps": out.done_in_window_rps(),
            "rejected_or_failed": int(overall["rejected"]) + int(overall["errors"]),
        }
        trials.append(record)
        log(
            f"search: {label:60s} TTFT P99 online {record['online_ttft_p99_ms']:6.0f} / batch "
            f"{record['batch_ttft_p99_ms']:6.0f} / offline {record['offline_ttft_p99_ms']:6.0f} "
            f"ms, {record['done_in_window_rps']:6.2f} done/s, "
            f"{record['rejected_or_failed']} rejected/failed"
        )
        return record

    best_cfg = SEED_TIER_CONFIG
    seed = best = trial("seed 000 config", best_cfg)
    top_rps = seed["done_in_window_rps"]
    path = ["seed 000 config"]

    def acceptable(r: dict[str, Any]) -> bool:
        # No lost work, and no other tier pays more than TIER_COST_CAP x what it pays under the
        # seed's config: under overload the backlog has to wait somewhere, and a config that
        # parks all of it on offline would win on online alone.
        return (
            r["rejected_or_failed"] == 0
            and r["done_in_window_rps"] >= THROUGHPUT_FLOOR * top_rps
            and all(
                r[f"{t}_ttft_p99_ms"] <= TIER_COST_CAP * seed[f"{t}_ttft_p99_ms"] for t in TIERS[1:]
            )
        )

    for axis, values in candidate_axes():
        for value_label, transform in values:
            cfg = transform(best_cfg)
            r = trial(f"{axis}={value_label} (on: {', '.join(path[1:]) or 'seed'})", cfg)
            top_rps = max(top_rps, r["done_in_window_rps"])
            r["accepted"] = acceptable(r)
            if r["accepted"] and r["online_ttft_p99_ms"] < best["online_ttft_p99_ms"]:
                best_cfg, best = cfg, r
                chosen = f"{axis}={value_label}"
                path = [*path[:1], *[p for p in path[1:] if not p.startswith(axis + "=")], chosen]
    return {
        "engine_policy": policy,
        "trial_seconds": trial_s,
        "throughput_floor": THROUGHPUT_FLOOR,
        "tier_cost_cap": TIER_COST_CAP,
        "trials": trials,
        "best_config": best_cfg,
        "best_path": path,
        "best_trial": best,
    }
