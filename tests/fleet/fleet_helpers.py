"""Helpers shared by the fleet tests: heartbeat bodies and posting them."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.seed import seed_tiers

SEED_TIERS = seed_tiers()


def sample(ts: float | None = None, **tiers: dict[str, Any]) -> dict[str, Any]:
    return {
        "ts": ts if ts is not None else time.time(),
        "gpu_source": "simulated",
        "gpus": [
            {"index": 0, "name": "sim", "util": 0.5, "mem_used_bytes": 1, "mem_total_bytes": 2}
        ],
        "engine": {"kv_cache_usage": 0.25, "running": 3, "waiting": 1},
        "tiers": tiers
        or {
            "online": {
                "depth": 2,
                "in_flight": 5,
                "finished": 4,
                "errors": 0,
                "ttft_p50_s": 0.08,
                "ttft_p99_s": 0.31,
            }
        },
    }


def beat(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "agent_version": "0.1.0",
        "mode": "attached",
        "listen_url": "",
        "applied": {"tier_config": None, "launch_profile": None},
        "keys_version": "",
        "health": {"gateway": "ok", "engine": "ok", "detail": ""},
        "engine": {
            "url": "http://127.0.0.1:8001",
            "model": "demo-8b",
            "simulated": True,
            "args": {},
        },
        "samples": [sample()],
    }
    body.update(fields)
    return body


def post_beat(client: Any, token: str | None, body: Any) -> Any:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    data = body if isinstance(body, str) else json.dumps(body)
    return client.post("/api/v1/agent/heartbeat", data, content_type="application/json", **headers)
