"""Real processes for the bench tests: a simulator behind a standalone agent, a gateway
Endpoint pointing at it, and helpers to make runs."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gpu_agent.sim.testing import run_sim_process
from gpu_agent.testing import start_agent_process

ROOT = Path(__file__).resolve().parents[2]
MODEL = "bench-demo"
GATEWAY_KEY = "tgk_bench_test_all_tiers_0123456789abcdef0123456789"
TIER_CONFIG = {
    "scheduler": {
        "queues": {
            "online": {
                "max_batch_size": 8,
                "max_waiting_time_ms": 2,
                "max_tokens_per_batch": 100000,
                "priority": 1,
            },
            "batch": {
                "max_batch_size": 16,
                "max_waiting_time_ms": 5,
                "max_tokens_per_batch": 100000,
                "priority": 2,
            },
            "offline": {
                "max_batch_size": 32,
                "max_waiting_time_ms": 10,
                "max_tokens_per_batch": 100000,
                "priority": 3,
            },
        }
    }
}


@dataclass
class Gateway:
    url: str  # the agent's base, without /v1
    key: str
    model: str


@contextlib.contextmanager
def _gateway(tmp: Path, sim_args: tuple[str, ...], preset: str | None) -> Iterator[Gateway]:
    keys = tmp / "keys.json"
    keys.write_text(
        json.dumps(
            [
                {
                    "name": "bench",
                    "key": GATEWAY_KEY,
                    "tiers": ["online", "batch", "offline"],
                    "default_tier": "online",
                }
            ]
        )
    )
    tiers = tmp / "tiers.json"
    tiers.write_text(json.dumps(TIER_CONFIG))
    with (
        run_sim_process(MODEL, sim_args, preset=preset) as sim_url,
        start_agent_process(
            ["--engine-url", sim_url, "--tier-config", str(tiers), "--keys", str(keys)],
            tmp / "agent.log",
        ) as agent,
    ):
        yield Gateway(agent.url, GATEWAY_KEY, MODEL)


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """`python -m gpu_agent` in standalone mode in front of a tiny-test simulator."""
    with _gateway(
        tmp_path_factory.mktemp("bench-agent"), ("--max-num-seqs", "64"), "tiny-test"
    ) as gw:
        yield gw


@pytest.fixture(scope="session")
def gpu_like_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """The same in front of the simulator's 8B-on-H100 model with prefix caching: steps of
    several ms, so latencies are the engine's and not the loaded test machine's."""
    flags = ("--max-num-seqs", "64", "--enable-prefix-caching")
    with _gateway(tmp_path_factory.mktemp("bench-agent-8b"), flags, None) as gw:
        yield gw


@pytest.fixture
def endpoint(gateway: Gateway, db: None) -> Any:
    """A gateway Endpoint for the agent, linked to a node with a tier config, a launch profile
    and a GPU in its last telemetry sample, so snapshots and charts have something to show."""
    from django.utils import timezone

    from console.fleet import services as fleet_services
    from console.fleet.choices import EndpointKind
    from console.fleet.models import Endpoint, TelemetrySample
    from console.tuning import services as tuning_services

    node, _ = fleet_services.create_node("bench-node", ["test"], None)
    tier = tuning_services.create_tier_config(
        name="bench", config=TIER_CONFIG, message="test", user=None
    )
    profile = tuning_services.create_launch_profile(
        name="bench", args={"model": MODEL, "max_num_seqs": 64}, message="test", user=None
    )
    type(node).objects.filter(pk=node.pk).update(
        applied_tier_config=tier,
        applied_launch_profile=profile,
        listen_url=gateway.url,
        engine={"model": MODEL, "simulated": True, "args": {"max_num_seqs": 64}},
    )
    now = timezone.now()
    TelemetrySample.objects.bulk_create(
        [
            TelemetrySample(
                node=node,
                ts=now - timedelta(seconds=s),
                gpu_source="simulated",
                gpus=[{"index": 0, "name": "Simulated H100"}],
                gpu_util=0.5,
                kv_cache_usage=0.2,
            )
            for s in (30, 20)
        ]
    )
    endpoint = fleet_services.create_endpoint(
        None,
        name="bench-gw",
        base_url=gateway.url + "/v1",
        api_key=gateway.key,
        kind=EndpointKind.GATEWAY,
        node=node,
        default_model=MODEL,
        models=[MODEL],
    )
    assert isinstance(endpoint, Endpoint)
    return endpoint


def add_telemetry(node_id: int, start: Any, seconds: int) -> None:
    """One sample a second from `start`, as the agent's heartbeats would store them."""
    from console.fleet.models import TelemetrySample

    TelemetrySample.objects.bulk_create(
        [
            TelemetrySample(
                node_id=node_id,
                ts=start + timedelta(seconds=i),
                gpu_source="simulated",
                gpus=[{"index": 0, "name": "Simulated H100"}],
                gpu_util=0.6 + i % 3 / 10,
                kv_cache_usage=0.3,
                queue_depth=i % 4,
            )
            for i in range(seconds)
        ],
        ignore_conflicts=True,
    )


SMOKE = {"concurrency": 4, "requests": 24, "prompt_tokens": 32, "max_tokens": 16}


@pytest.fixture
def plain_endpoint(db: None) -> Any:
    """An endpoint no process answers: for tests that never send a request."""
    from console.fleet import services as fleet_services

    return fleet_services.create_endpoint(
        None,
        name="plain",
        base_url="http://127.0.0.1:9/v1",
        api_key="sk-test-plain-0000000000",
        default_model="m1",
    )


def stored_run(
    endpoint: Any,
    *,
    ttft_scale: float,
    n: int = 300,
    max_num_seqs: int = 64,
    status: str = "succeeded",
    seed: int = 0,
    label: str = "",
) -> Any:
    """A finished run with synthetic samples (two tiers) and a snapshot, as if a task had
    stored them; nothing is sent anywhere."""
    import numpy as np

    from console.bench.models import BenchmarkRun, RequestSample
    from loadgen import summarize

    rng = np.random.default_rng(seed)
    run = BenchmarkRun.objects.create(
        endpoint=endpoint,
        model="m1",
        label=label,
        status=status,
        workload={
            "base_url": endpoint.base_url,
            "model": "m1",
            "concurrency": 8,
            "requests": n,
            "slo_ttft_ms": 500.0,
        },
        config_snapshot={
            "nodes": [
                {
                    "id": None,
                    "name": "n1",
                    "tier_config": {"name": "t", "version": 1, "config": TIER_CONFIG},
                    "launch_profile": {
                        "name": "p",
                        "version": 1,
                        "args": {"max_num_seqs": max_num_seqs},
                    },
                    "engine": {"args": {"max_num_seqs": max_num_seqs}},
                    "gpu": {"models": ["H100"]},
                }
            ]
        },
    )
    samples = []
    for i in range(n):
        ttft = float(rng.exponential(ttft_scale)) + 0.01
        samples.append(
            RequestSample(
                run=run,
                index=i,
                tier="online" if i % 4 else "batch",
                send_time=1000.0 + i * 0.01,
                ttft=ttft,
                tpot=0.01,
                e2e=ttft + 0.2,
                prompt_tokens=32,
                output_tokens=20,
                itl_count=19,
                itl_mean=0.01,
                status=200,
            )
        )
    RequestSample.objects.bulk_create(samples)
    run.summary = summarize([s.to_loadgen() for s in samples], slo_ttft_ms=500.0)
    run.save(update_fields=["summary"])
    return run
