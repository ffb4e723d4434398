"""Telemetry from a real vLLM: every metric the agent reads is in vLLM's /metrics (a renamed
metric fails here), and the agent's /metrics and heartbeat carry the figures it reads."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from console.bench.headline.telemetry import KvSampler
from gpu_agent.telemetry import ENGINE_METRICS, parse_engine_metrics
from tests.agent.agent_helpers import GATEWAY_KEYS, NODE_TOKEN, FakeConsole, start_agent
from tests.vllm.vllm_helpers import MODEL_NAME, TIMEOUT, VllmServer

pytestmark = [pytest.mark.vllm, TIMEOUT]

# Read elsewhere than the agent's sampler: the load generator's and the headline's counters,
# and the latency histograms docs/architecture.md#telemetry names (the Kubernetes adapter rule reads
# TTFT's).
ALSO_READ = (
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:generation_tokens",
)
# Long enough to fill whole KV blocks, so the repeat is a prefix-cache hit.
PROMPT = " ".join(f"word{i % 50}" for i in range(600))


def families(text: str) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(text) if f.samples}


def test_every_vllm_metric_the_agent_reads_is_exported(vllm_priority: VllmServer) -> None:
    exported = families(httpx.get(vllm_priority.url + "/metrics", timeout=10).text)
    exported_names = {name.removesuffix("_total") for name in exported}
    missing = sorted(set(ENGINE_METRICS) - exported_names)
    assert not missing, f"vLLM {vllm_priority.url} no longer exports {missing}"
    assert not sorted(set(ALSO_READ) - exported_names)
    # The counters the agent differences are counters, the gauges gauges.
    assert exported["vllm:prefix_cache_queries"] == "counter"
    assert exported["vllm:num_requests_running"] == "gauge"
    assert exported["vllm:time_to_first_token_seconds"] == "histogram"
    figures = parse_engine_metrics(httpx.get(vllm_priority.url + "/metrics", timeout=10).text)
    assert set(figures) == set(ENGINE_METRICS.values())


@pytest.fixture
async def console() -> AsyncIterator[FakeConsole]:
    fake = FakeConsole(gateway_keys=GATEWAY_KEYS, keys_version="k1")
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


async def test_the_agent_reports_vllm_figures_in_heartbeats_and_metrics(
    vllm_priority: VllmServer, console: FakeConsole, tmp_path: Path
) -> None:
    args = [
        "--engine-url", vllm_priority.url,
        "--console", console.url,
        "--node-token", NODE_TOKEN,
        "--state-dir", str(tmp_path / "state"),
    ]  # fmt: skip
    with start_agent(args, tmp_path / "agent.log") as agent:
        await console.wait_beat(
            lambda b: any(s["engine"].get("kv_cache_usage") is not None for s in b["samples"]),
            60,
            "vLLM's KV use",
        )
        async with httpx.AsyncClient(timeout=120) as client:
            for _ in range(2):  # the second is a prefix-cache hit
                response = await client.post(
                    vllm_priority.url + "/v1/completions",
                    json={"model": MODEL_NAME, "prompt": PROMPT, "max_tokens": 1},
                )
                assert response.status_code == 200, response.text
        beat = await console.wait_beat(
            lambda b: any((s["engine"].get("prefix_hit_rate") or 0) > 0 for s in b["samples"]),
            30,
            "a prefix hit rate",
        )
        engine = next(s["engine"] for s in beat["samples"] if s["engine"].get("prefix_hit_rate"))
        assert 0 < engine["prefix_hit_rate"] <= 1
        assert engine["running"] is not None and engine["waiting"] is not None
        assert engine["preemptions_total"] == 0
        assert 0 <= engine["kv_cache_usage"] <= 1
        assert beat["engine"]["model"] == MODEL_NAME
        assert beat["engine"]["simulated"] is False
        assert beat["samples"][-1]["gpu_source"] == "none"  # no GPU, and not a simulator
        exposed = families(httpx.get(agent.url + "/metrics", timeout=10).text)
        for name in (
            "tiergate_engine_kv_cache_usage_ratio",
            "tiergate_engine_requests_running",
            "tiergate_engine_requests_waiting",
            "tiergate_engine_preemptions",
        ):
            assert name in exposed, name
        assert "tiergate_engine_up 1.0" in httpx.get(agent.url + "/metrics", timeout=10).text


async def test_the_headline_sampler_reads_vllm_s_tokens_and_steps_in_the_window(
    vllm_priority: VllmServer,
) -> None:
    """The headline arms' and lab.engine_windows' engine figures: the rise of vLLM's own
    counters between the sampler's points inside the window is the tokens it made, the tokens
    it computed and the steps it took."""
    sampler = KvSampler(vllm_priority.url, simulated=False, interval_s=0.2)
    task = asyncio.create_task(sampler.run())
    start = time.time()
    await asyncio.sleep(0.5)  # a point before the request
    async with httpx.AsyncClient(timeout=120) as client:
        response = await client.post(
            vllm_priority.url + "/v1/completions",
            json={"model": MODEL_NAME, "prompt": "hello", "max_tokens": 48, "ignore_eos": True},
        )
    assert response.status_code == 200, response.text
    await asyncio.sleep(0.6)  # a point after it
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    end = time.time()
    made = response.json()["usage"]["completion_tokens"]
    assert made == 48
    prompt = response.json()["usage"]["prompt_tokens"]
    inside = [p for p in sampler.points if start <= p["t"] <= end]
    assert inside[-1]["generated"] - inside[0]["generated"] == made
    # Every token computed in a step: the prompt's (nothing cached) and the generated ones;
    # and one step per generated token, the prefill's giving the first.
    assert inside[-1]["computed"] - inside[0]["computed"] == prompt + made
    assert inside[-1]["steps"] - inside[0]["steps"] == made
    figures = sampler.summary((start, end))
    span = inside[-1]["t"] - inside[0]["t"]
    assert figures["generated_in_window_tps"] == pytest.approx(made / span)
    assert figures["computed_in_window_tps"] == pytest.approx((prompt + made) / span)
    assert figures["steps_in_window_sps"] == pytest.approx(made / span)
