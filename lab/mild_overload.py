"""A sustained mild overload on the fake-clock engine (a script, not a test): engine priority
alone against the gateway with the seed's config, (d), and without the starvation bound, (s).

    .venv/bin/python lab/mild_overload.py [--rate 17] [--seeds 1 2 3]

The engine is tests/scheduler/sched_engine.py's: 16 sequences, online streams of 1 s, batch
2 s, offline 3 s, and a first token 0.05 s + 15 ms per request running after a request starts
(a CPU engine's step grows with its batch); the mix of the feed tests (7 online : 2 batch :
1 offline), Poisson for 60 s; `max_in_flight` the agent's default (256). At 17 req/s online
alone needs about 15 of the 16 sequences: the shape of the real-vLLM rounds E1-E3
(docs/performance.md). Everything is simulated and deterministic; tests/scheduler/
test_sched_mild.py asserts the same runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.scheduler.sched_engine import EngineRun
from tests.scheduler.test_sched_mild import DIRECT, mild_overload

ARMS: dict[str, dict[str, object] | None] = {
    "direct": DIRECT,
    "(d)": None,
    "(s)": {"min_share": 0},
}


def row(run: EngineRun) -> str:
    ttfts = run.ttfts("online")
    online = sum(1 for r in run.arrived_at if r.startswith("online"))
    p50 = ttfts[len(ttfts) // 2]
    p99 = ttfts[int(0.99 * (len(ttfts) - 1))]
    lower = ", ".join(
        f"{tier} {sum(1 for r in run.first_token_at if r.startswith(tier))}/"
        f"{sum(1 for r in run.arrived_at if r.startswith(tier))}"
        for tier in ("batch", "offline")
    )
    return (
        f"online TTFT p50 {p50:.2f} s p99 {p99:.2f} s, served {len(ttfts)}/{online} "
        f"({lower}), engine running {run.mean_running(10.0, 60.0):.2f} of 16"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=17.0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args()
    for seed in args.seeds:
        for name, admission in ARMS.items():
            run = mild_overload(admission, seed, rate=args.rate)
            print(f"seed {seed} {name:6} {row(run)}")


if __name__ == "__main__":
    main()
