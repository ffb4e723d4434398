"""Fleet fixtures: a node with its plaintext token, tier configs and launch profiles made
through the tuning app's services, a heartbeat body builder, and a local OpenAI-like server."""

from __future__ import annotations

from typing import Any

import pytest

SEED_TIERS = {"scheduler": {
    "queues": {
        "online": {"max_batch_size": 8, "max_waiting_time_ms": 10, "max_tokens_per_batch": 4096, "priority": 1},
        "batch": {"max_batch_size": 32, "max_waiting_time_ms": 50, "max_tokens_per_batch": 16384, "priority": 2},
        "offline": {"max_batch_size": 64, "max_waiting_time_ms": 200, "max_tokens_per_batch": 32768,
                    "priority": 3}},
    "adaptive": {"enabled": True, "online_pressure_threshold": 10, "wait_time_reduction_ratio": 0.5}}}


@pytest.fixture
def node_and_token(db: None) -> tuple[Any, str]:
    from console.fleet import services

    return services.create_node("gpu-a-01", ["h200"], None)


@pytest.fixture
def tier_config(db: None) -> Any:
    from console.tuning.services import create_tier_config

    return create_tier_config(name="seed-000", config=SEED_TIERS, message="seed")


@pytest.fixture
def launch_profile(db: None) -> Any:
    from console.tuning.services import create_launch_profile

    return create_launch_profile(name="demo", args={"model": "demo-8b", "max_num_seqs": 64}, message="demo")
