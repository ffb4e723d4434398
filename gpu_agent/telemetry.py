"""The 1 Hz sampler (docs/architecture.md#telemetry): GPU, engine and tier figures into a bounded
ring buffer.

Each tick builds one sample in the heartbeat's shape (docs/protocol.md) from:
- the GPUs: the simulator's own figures when the engine is the simulator (it answers
  /sim/v1/gpu; labelled "simulated"), else NVML, else nothing (gpu_source "none");
- the engine's /metrics, parsed with prometheus_client's parser (`parse_engine_metrics`);
- the scheduler's stats and the requests finished in the interval (`IntervalStats.take`).
It also probes the engine's /health and, every few ticks, its model list.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from gpu_agent.metrics import IntervalStats
from gpu_agent.nvml import NvmlReader
from scheduler import SchedulerStats

log = logging.getLogger("gpu_agent.telemetry")

RING_SIZE = 600  # ten minutes at 1 Hz: what a heartbeat may carry after an outage
MODELS_EVERY_TICKS = 5


def _family_total(family: Any) -> float:
    """Sum of a family's values across label sets (one per model), skipping _created."""
    total = 0.0
    for sample in family.samples:
        if sample.name.endswith("_created"):
            continue
        total += float(sample.value)
    return total


# The vLLM metric families the agent reads (docs/architecture.md#telemetry), by family name
# (counters without `_total`) -> the short name of its figure. One list: tests/vllm checks every
# name against a real vLLM's /metrics, so a renamed metric fails a test.
ENGINE_METRICS = {
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:prefix_cache_queries": "prefix_queries",
    "vllm:prefix_cache_hits": "prefix_hits",
    "vllm:num_preemptions": "preemptions_total",
}
# Older vLLM releases' names, read only when the new one is absent.
LEGACY_ENGINE_METRICS = {"vllm:gpu_cache_usage_perc": "kv_cache_usage"}
# The lines of those families only (their samples, counters' `_total` ones, and their HELP and
# TYPE lines). vLLM's /metrics is some 600 lines of histograms the agent does not read; the
# library parses the rest in about 1/20 of the time (26 -> 1.3 ms on a 2-core EPYC), which
# counts where the agent shares cores with the engine (docs/gateway.md).
_READ_LINES = re.compile(
    r"^(?:# (?:HELP|TYPE) )?(?:"
    + "|".join(re.escape(name) for name in (*ENGINE_METRICS, *LEGACY_ENGINE_METRICS))
    + r")(?:_total)?[ {].*$",
    re.MULTILINE,
)


def parse_engine_metrics(text: str) -> dict[str, float]:
    """vLLM's /metrics text -> the cumulative figures the agent reads, keyed by short name.

    vLLM renamed its KV gauge (`vllm:gpu_cache_usage_perc` -> `vllm:kv_cache_usage_perc`); the
    new name wins when both are there. The parser strips `_total` from counter names.
    """
    out: dict[str, float] = {}
    legacy: dict[str, float] = {}
    read = "\n".join(m.group(0) for m in _READ_LINES.finditer(text))
    for family in text_string_to_metric_families(read + "\n" if read else ""):
        # Exporters differ on whether the TYPE line carries `_total`; when it does not match
        # the samples, the parser yields an empty typed family and an untyped `..._total` one.
        name = family.name.removesuffix("_total")
        if not family.samples:
            continue
        # Summed over families too: an untyped sample is a family of its own (one per engine).
        if name in ENGINE_METRICS:
            key = ENGINE_METRICS[name]
            out[key] = out.get(key, 0.0) + _family_total(family)
        elif name in LEGACY_ENGINE_METRICS:
            key = LEGACY_ENGINE_METRICS[name]
            legacy[key] = legacy.get(key, 0.0) + _family_total(family)
    return {**legacy, **out}


def engine_figures(now: dict[str, float], before: dict[str, float] | None) -> dict[str, Any]:
    """The sample's "engine" object; the prefix hit rate is over the interval since `before`
    (None when no prefix lookups happened in it)."""
    hit_rate: float | None = None
    if before is not None and "prefix_queries" in now and "prefix_queries" in before:
        queries = now["prefix_queries"] - before["prefix_queries"]
        if queries > 0:
            hit_rate = (now.get("prefix_hits", 0.0) - before.get("prefix_hits", 0.0)) / queries
    running = now.get("running")
    waiting = now.get("waiting")
    preemptions = now.get("preemptions_total")
    return {
        "kv_cache_usage": now.get("kv_cache_usage"),
        "running": None if running is None else int(running),
        "waiting": None if waiting is None else int(waiting),
        "prefix_hit_rate": hit_rate,
        "preemptions_total": None if preemptions is None else int(preemptions),
    }


def tier_figures(stats: SchedulerStats, interval: dict[str, dict[str, Any]]) -> dict[str, Any]:
    tiers: dict[str, Any] = {}
    empty = {"finished": 0, "errors": 0, "rejected": 0, "ttft_p50_s": None, "ttft_p99_s": None}
    for name, tier in stats.tiers.items():
        tiers[name] = {
            "depth": tier.depth,
            "in_flight": tier.in_flight,
            "effective_wait_s": tier.effective_wait_s,
            **interval.get(name, empty),
        }
    # A tier removed by a reconfigure may still have requests finishing in this interval.
    for name, figures in interval.items():
        if name not in tiers:
            tiers[name] = {"depth": 0, "in_flight": 0, "effective_wait_s": None, **figures}
    return tiers


class Telemetry:
    """Samples once a second; keeps the last RING_SIZE samples, numbered for the reconciler."""

    def __init__(
        self,
        engine_url: Callable[[], str],
        scheduler_stats: Callable[[], SchedulerStats],
        interval: IntervalStats,
        nvml: NvmlReader | None = None,
        period_s: float = 1.0,
        ring_size: int = RING_SIZE,
        on_engine: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self._engine_url = engine_url
        self._on_engine = on_engine  # called with each parsed "engine" object
        self._scheduler_stats = scheduler_stats
        self._interval = interval
        self._nvml = nvml or NvmlReader()
        self.period_s = period_s
        self.ring: deque[tuple[int, dict[str, Any]]] = deque(maxlen=ring_size)
        self._seq = 0
        self._before: dict[str, float] | None = None
        self._ticks = 0
        self._task: asyncio.Task[None] | None = None
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(0.8, connect=0.5))
        # What the gateway and the heartbeat read between ticks.
        self.engine_health = "down"
        self.engine_ups = 0  # times the engine came (back) up: a restart may change its flags
        self.simulated = False
        self.models: list[str] | None = None  # None: not known (engine never answered)

    # -- reading ------------------------------------------------------------------------

    def latest(self) -> dict[str, Any] | None:
        return self.ring[-1][1] if self.ring else None

    def since(self, seq: int) -> tuple[int, list[dict[str, Any]]]:
        """Samples numbered above `seq`, oldest first, and the newest number."""
        samples = [s for n, s in self.ring if n > seq]
        return self._seq, samples

    # -- running ------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="telemetry")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._client.aclose()
        self._nvml.close()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            try:
                await self.tick()
            except Exception:  # a sample must never stop the sampler
                log.exception("telemetry tick failed")
            # Fixed cadence without drift; after a stall, skip the missed ticks.
            next_at += self.period_s
            now = loop.time()
            if next_at < now:
                next_at = now + self.period_s
            await asyncio.sleep(next_at - now)

    async def tick(self) -> dict[str, Any]:
        ts = time.time()
        base = self._engine_url()
        self._ticks += 1
        want_models = self.models is None or self._ticks % MODELS_EVERY_TICKS == 0
        health, metrics_text, sim_gpu, models = await asyncio.gather(
            self._get(base + "/health"),
            self._get(base + "/metrics"),
            # Probed every tick (one local GET): the engine may be swapped by a restart.
            self._get(base + "/sim/v1/gpu"),
            self._get(base + "/v1/models") if want_models else _none(),
        )
        if health is not None and self.engine_health != "ok":
            self.engine_ups += 1
        self.engine_health = "ok" if health is not None else "down"
        if models is not None:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                self.models = [m["id"] for m in models.json()["data"]]
        sample: dict[str, Any] = {"ts": ts, "gpu_source": "none", "gpus": []}
        gpu = _json_object(sim_gpu)  # a 200 that is not the simulator's object: not a simulator
        if health is not None:
            self.simulated = gpu is not None
        if gpu is not None:
            sample["gpu_source"] = "simulated"
            sample["gpus"] = [
                {
                    "index": 0,
                    "name": gpu.get("name"),
                    "util": gpu.get("util"),
                    "mem_used_bytes": gpu.get("mem_used_bytes"),
                    "mem_total_bytes": gpu.get("mem_total_bytes"),
                    "power_w": None,
                    "temp_c": None,
                    "sm_clock_mhz": None,
                }
            ]
        else:
            gpus = await asyncio.to_thread(self._nvml.read)
            if gpus is not None:
                sample["gpu_source"] = "nvml"
                sample["gpus"] = gpus
        engine: dict[str, Any] = {}
        if metrics_text is not None:
            try:
                now = parse_engine_metrics(metrics_text.text)
            except ValueError as exc:
                log.warning("engine /metrics did not parse: %s", exc)
            else:
                engine = engine_figures(now, self._before)
                self._before = now
                if self._on_engine is not None:
                    self._on_engine(engine)
        sample["engine"] = engine
        sample["tiers"] = tier_figures(self._scheduler_stats(), self._interval.take())
        self._seq += 1
        self.ring.append((self._seq, sample))
        return sample

    async def _get(self, url: str) -> httpx.Response | None:
        try:
            response = await self._client.get(url)
        except httpx.HTTPError:
            return None
        return response if response.status_code == 200 else None


async def _none() -> None:
    return None


def _json_object(response: httpx.Response | None) -> dict[str, Any] | None:
    if response is None:
        return None
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None
