"""Console CPU per heartbeat: POST /api/v1/agent/heartbeat through Django's full stack
(middleware, DRF, pydantic, one transaction) in-process, on a throwaway SQLite database.

    python lab/bench_heartbeat.py [--beats 500] [--samples 1]

No network and one client, so this is the console's own cost per beat, the figure that says
how many agents one web process can serve at one beat per second each."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from loadgen import percentile


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--beats", type=int, default=500)
    parser.add_argument("--samples", type=int, default=1)
    args = parser.parse_args()

    data = tempfile.mkdtemp(prefix="tg-hb-bench-")
    os.environ.update(
        TIERGATE_DATA_DIR=data,
        DATABASE_URL=f"sqlite:///{data}/bench.sqlite3",
        DJANGO_SETTINGS_MODULE="console.settings",
        TIERGATE_LOG_LEVEL="WARNING",
    )
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    from console.fleet import gateway_keys, services

    call_command("migrate", verbosity=0)
    _, token = services.create_node("bench-node", [], None)
    gateway_keys.create_gateway_key("bench", ["online", "batch", "offline"], "online", None)
    client = Client()
    keys_version = ""
    timings: list[float] = []
    t0 = time.time()
    for i in range(args.beats):
        samples = [
            {
                "ts": t0 + i * args.samples + j,
                "gpu_source": "simulated",
                "gpus": [{"index": 0, "name": "sim", "util": 0.9}],
                "engine": {"kv_cache_usage": 0.5, "running": 10, "waiting": 2},
                "tiers": {
                    t: {
                        "depth": 1,
                        "in_flight": 2,
                        "finished": 5,
                        "errors": 0,
                        "ttft_p50_s": 0.1,
                        "ttft_p99_s": 0.3,
                    }
                    for t in ("online", "batch", "offline")
                },
            }
            for j in range(args.samples)
        ]
        body = json.dumps(
            {
                "mode": "attached",
                "listen_url": "http://127.0.0.1:9101",
                "keys_version": keys_version,
                "applied": {"tier_config": None, "launch_profile": None},
                "health": {"gateway": "ok", "engine": "ok"},
                "samples": samples,
            }
        )
        start = time.perf_counter()
        r = client.post(
            "/api/v1/agent/heartbeat",
            body,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )
        timings.append(time.perf_counter() - start)
        assert r.status_code == 200, r.content
        keys_version = r.json()["keys_version"]
    timings = timings[10:]  # the first beats create the node's gateway endpoint and warm caches
    ms = sorted(t * 1000 for t in timings)
    print(
        f"{len(ms)} beats x {args.samples} samples: mean {statistics.mean(ms):.2f} ms, "
        f"p50 {percentile(ms, 50):.2f} ms, p99 {percentile(ms, 99):.2f} ms "
        f"-> ~{1000 / statistics.mean(ms):.0f} beats/s per web process"
    )


if __name__ == "__main__":
    main()
