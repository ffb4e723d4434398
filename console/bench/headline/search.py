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

from collections.abc import Callable
from typing import Any

from console.bench.headline.arms import Arm, Setup, run_arm
from console.bench.headline.workload import SEED_TIER_CONFIG, TIERS, with_admission, with_waits

THROUGHPUT_FLOOR = 0.97
TIER_COST_CAP = 1.5
INF = float("inf")
Log = Callable[[str], None]
Transform = Callable[[dict[str, Any]], dict[str, Any]]


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
