"""Every query docker/ ships runs against a real Prometheus (Debian's package) that scrapes a
real agent in front of the simulator, under load, with the shipped rule files loaded.

Dashboards, recording rules and the prometheus-adapter queries must parse and return data;
alert expressions must parse, evaluate without error in Prometheus, and each of their
selectors must return data (an alert that does not fire rightly returns nothing, a misspelt
metric must not pass for that). The agent runs in console mode against a fake console, so the
heartbeat series exist as they do in production.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gpu_agent.sim.testing import free_port, run_sim_process
from gpu_agent.testing import AgentProcess
from tests.agent.agent_helpers import (
    ALL_KEY,
    GATEWAY_KEYS,
    MODEL,
    NODE_TOKEN,
    FakeConsole,
    queue,
    tier_config,
)
from tests.production.shipped import (
    RULE_FILES,
    Query,
    adapter_metric_name,
    adapter_queries,
    adapter_rules,
    dashboard_queries,
    hpa_metrics,
    rule_queries,
    rules,
    selectors,
)

pytestmark = pytest.mark.slow
PROMETHEUS = "/usr/bin/prometheus"
NAMESPACE, POD = "tiergate", "engine-0"  # what the ServiceMonitor's labels would say
# Long enough to share prefix-cache blocks between requests.
PREFIX = "You are a terse assistant for an inference fleet. " * 12
DATA_DEADLINE_S = 60.0


def prometheus_config(tmp: Path, agent_port: int, engine_url: str) -> Path:
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(p) for p in RULE_FILES],
        "scrape_configs": [
            {
                "job_name": "tiergate-agent",
                "static_configs": [
                    {
                        "targets": [f"127.0.0.1:{agent_port}"],
                        "labels": {"namespace": NAMESPACE, "pod": POD},
                    }
                ],
            },
            {
                "job_name": "engine",
                "static_configs": [{"targets": [engine_url.removeprefix("http://")]}],
            },
        ],
    }
    path = tmp / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


@contextlib.contextmanager
def run_prometheus(config: Path, tmp: Path) -> Any:
    port = free_port()
    log = tmp / "prometheus.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, log.read_text()
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(url + "/-/ready", timeout=1).status_code == 200:
                    break
            assert time.monotonic() < deadline, "prometheus not ready:\n" + log.read_text()
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


async def load(agent_url: str, stop: asyncio.Event) -> None:
    """Streamed requests on every tier, sharing a prompt prefix, until `stop`; bursts on the
    offline tier (queue depth 1) so some are refused with queue_full."""
    headers = {"Authorization": f"Bearer {ALL_KEY}"}
    async with httpx.AsyncClient(base_url=agent_url, headers=headers, timeout=30) as client:

        async def one(tier: str, n: int) -> None:
            body = {
                "model": MODEL,
                "messages": [{"role": "user", "content": f"{PREFIX} question {n}"}],
                "max_tokens": 8,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            async with client.stream(
                "POST", "/v1/chat/completions", json=body, headers={"X-Tiergate-Tier": tier}
            ) as response:
                async for _ in response.aiter_bytes():
                    pass

        n = 0
        while not stop.is_set():
            n += 1
            tiers = ["online", "online", "batch", *(["offline"] * 6)]
            await asyncio.gather(*(one(t, n * 10 + i) for i, t in enumerate(tiers)))
            await asyncio.sleep(0.05)


async def run_query(client: httpx.AsyncClient, query: Query) -> str | None:
    """None when the query is as it must be, else what is wrong."""
    response = await client.get("/api/v1/query", params={"query": query.expr})
    body = response.json()
    if body.get("status") != "success":
        return f"{query.origin}: {body.get('error')} in {query.expr}"
    result = body["data"]["result"]
    if query.must_return_data and not result:
        return f"{query.origin}: no data for {query.expr}"
    for selector in selectors(query.expr):
        response = await client.get("/api/v1/query", params={"query": selector})
        if not response.json()["data"]["result"]:
            return f"{query.origin}: no series {selector}"
    return None


@pytest.fixture
async def console() -> AsyncIterator[FakeConsole]:
    fake = FakeConsole(interval_s=0.5)
    fake.tier_config = {
        "id": 1,
        "name": "prod",
        "config": tier_config({"max_in_flight": 2}, offline=queue(3, max_queue_depth=1)),
    }
    fake.gateway_keys = GATEWAY_KEYS
    fake.keys_version = "k1"
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


async def test_every_shipped_query_returns_data_from_a_real_prometheus(
    tmp_path: Path, console: FakeConsole
) -> None:
    sim_args = ("--max-num-seqs", "4", "--enable-prefix-caching")
    with run_sim_process(MODEL, sim_args) as engine_url:
        args = ["--engine-url", engine_url, "--console", console.url, "--node-token", NODE_TOKEN]
        args += ["--state-dir", str(tmp_path / "state")]
        agent = AgentProcess.spawn(args, tmp_path / "agent.log", node_token=NODE_TOKEN)
        with agent:
            await asyncio.to_thread(agent.wait_ready)
            await console.wait_beat(
                lambda b: b.get("keys_version") == "k1" and b["applied"].get("tier_config") == 1,
                timeout=20,
                what="keys and tier config applied",
            )
            config = prometheus_config(tmp_path, agent.port, engine_url)
            with run_prometheus(config, tmp_path) as prometheus_url:
                stop = asyncio.Event()
                traffic = asyncio.create_task(load(agent.url, stop))
                try:
                    await check_queries(prometheus_url, agent)
                finally:
                    stop.set()
                    await traffic


async def check_queries(prometheus_url: str, agent: AgentProcess) -> None:
    queries = dashboard_queries() + rule_queries() + adapter_queries(NAMESPACE, POD)
    assert len(queries) > 40  # the extraction found the files' queries
    async with httpx.AsyncClient(base_url=prometheus_url, timeout=10) as client:
        deadline = time.monotonic() + DATA_DEADLINE_S
        while True:
            results = await asyncio.gather(*(run_query(client, q) for q in queries))
            problems = [p for p in results if p is not None]
            if not problems:
                break
            assert time.monotonic() < deadline, "\n".join(problems) + "\n" + agent.output()[-3000:]
            await asyncio.sleep(1.0)
        # Prometheus loaded every shipped rule and evaluates each without error.
        groups = (await client.get("/api/v1/rules")).json()["data"]["groups"]
        loaded = {r["name"]: r for g in groups for r in g["rules"]}
        assert set(loaded) == {r.get("record") or r["alert"] for r in rules()}
        for name, rule in loaded.items():
            assert rule["health"] == "ok", (name, rule.get("lastError"))
        # The HPA reads numbers: each adapter query gives one finite value for the pod.
        for query in adapter_queries(NAMESPACE, POD):
            if query.origin.endswith(" series"):
                continue
            result = (await client.get("/api/v1/query", params={"query": query.expr})).json()
            samples = result["data"]["result"]
            assert [s["metric"] for s in samples] == [{"pod": POD}], query
            assert math.isfinite(float(samples[0]["value"][1])), query


def test_the_hpa_asks_only_for_metrics_the_adapter_exposes() -> None:
    exposed = {adapter_metric_name(rule)[1] for rule in adapter_rules()}
    wanted = {metric["name"] for metric in hpa_metrics()}
    assert wanted and wanted <= exposed
