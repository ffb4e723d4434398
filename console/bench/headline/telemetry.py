"""What the load generator cannot see: engine KV use, preemptions, gateway rejections, and how
faithfully the simulator kept its modelled step timing while the arm ran."""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import httpx
from prometheus_client.parser import text_string_to_metric_families

# Once a second: each scrape of a real vLLM's /metrics costs its API server some 10 ms of CPU,
# which the benchmark must not take from the engine it measures (nor, for the gateway's, from
# the gateway arms alone).
SAMPLE_INTERVAL_S = 1.0


def families(text: str, names: Iterable[str]) -> Iterable[Any]:
    """The metric families of `names` (a gauge by its name; a counter by its family name and
    its `_total` sample name both, as KvSampler reads ENGINE_COUNTERS) in an exposition: the other
    lines are dropped before the library parses, since a real vLLM's /metrics is ~600 lines
    that take ~26 ms to parse whole on a 2-core machine, in the load generator's own event
    loop."""
    wanted = set(names)
    kept = [line for line in text.splitlines() if _metric_of(line) in wanted]
    return text_string_to_metric_families("\n".join(kept) + "\n" if kept else "")


def _metric_of(line: str) -> str:
    """The metric a sample line or TYPE line is about (a TYPE line keeps a family's samples
    together: without it every sample is a family of its own)."""
    if line.startswith("#"):
        parts = line.split(" ", 3)
        return parts[2] if len(parts) > 2 and parts[1] == "TYPE" else ""
    return line.split("{", 1)[0].split(" ", 1)[0]


def scrape(url: str) -> Iterator[tuple[str, dict[str, str], float]]:
    """(sample name, labels, value) of every sample at `url` (a Prometheus /metrics)."""
    text = httpx.get(url, timeout=10.0).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            yield sample.name, dict(sample.labels), float(sample.value)


def engine_counters(engine_url: str) -> dict[str, float]:
    """The engine's cumulative counters this experiment reports (vLLM names)."""
    wanted = {
        "vllm:num_preemptions_total": "preemptions",
        "vllm:prefix_cache_queries_total": "prefix_queries",
        "vllm:prefix_cache_hits_total": "prefix_hits",
        "vllm:generation_tokens_total": "generation_tokens",
    }
    out = dict.fromkeys(wanted.values(), 0.0)
    for name, _labels, value in scrape(engine_url + "/metrics"):
        if name in wanted:
            out[wanted[name]] += value
    return out


def gateway_rejections(gateway_url: str) -> dict[str, dict[str, int]]:
    """{tier: {reason: count}} from tiergate_rejections_total."""
    out: dict[str, dict[str, int]] = {}
    for name, labels, value in scrape(gateway_url + "/metrics"):
        if name == "tiergate_rejections_total" and value:
            tier = out.setdefault(labels.get("tier", ""), {})
            tier[labels.get("reason", "")] = int(value)
    return out


def sim_gpu(engine_url: str) -> dict[str, Any]:
    data: dict[str, Any] = httpx.get(engine_url + "/sim/v1/gpu", timeout=10.0).json()
    return data


# A real vLLM's gauges for the same figures (it has no GPU utilisation to give on a CPU).
VLLM_GAUGES = {
    "vllm:kv_cache_usage_perc": "kv",
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
}
# And the engine's own counts (a counter's family drops `_total`; a histogram's samples are
# `_count` and `_sum`), so that an arm's engine work in the window is read apart from what
# reached the client: the tokens it generated, every token it computed in a step (prefill not
# served from the prefix cache, plus generated), and its steps (one observation a step).
GENERATED = "vllm:generation_tokens"
ITERATION = "vllm:iteration_tokens_total"
ENGINE_COUNTERS = {  # point key: (family, sample)
    "generated": (GENERATED, GENERATED + "_total"),
    "computed": (ITERATION, ITERATION + "_sum"),
    "steps": (ITERATION, ITERATION + "_count"),
}
_READ = [*VLLM_GAUGES, *(name for pair in ENGINE_COUNTERS.values() for name in pair)]


def counter_rate(
    points: Iterable[dict[str, float]], key: str, start: float, end: float
) -> float | None:
    """Per second, how much the counter `key` of timestamped points (`t`) rose between the
    first and the last point inside [start, end] (pure; None with fewer than two, or when it
    fell: the engine restarted)."""
    inside = [p for p in points if key in p and start <= p["t"] <= end]
    if len(inside) < 2 or inside[-1]["t"] <= inside[0]["t"]:
        return None
    rise = inside[-1][key] - inside[0][key]
    return rise / (inside[-1]["t"] - inside[0]["t"]) if rise >= 0 else None


@dataclass
class KvSampler:
    """Polls the engine during an arm (KV use, running, waiting, util): the simulator's
    /sim/v1/gpu, or a real vLLM's /metrics."""

    engine_url: str
    simulated: bool = True
    interval_s: float = SAMPLE_INTERVAL_S
    points: list[dict[str, float]] = field(default_factory=list)

    async def _point(self, session: aiohttp.ClientSession) -> dict[str, float]:
        if not self.simulated:
            async with session.get(self.engine_url + "/metrics") as resp:
                text = await resp.text()
            point = dict.fromkeys(VLLM_GAUGES.values(), 0.0)
            for family in families(text, _READ):
                if family.name in VLLM_GAUGES:
                    point[VLLM_GAUGES[family.name]] = sum(s.value for s in family.samples)
                for key, (name, sample) in ENGINE_COUNTERS.items():
                    if family.name == name:
                        point[key] = sum(s.value for s in family.samples if s.name == sample)
            return point
        async with session.get(self.engine_url + "/sim/v1/gpu") as resp:
            data = await resp.json()
        return {
            "kv": float(data["kv_cache_usage"]),
            "running": float(data["num_requests_running"]),
            "waiting": float(data["num_requests_waiting"]),
            "util": float(data["util"]),
        }

    async def run(self) -> None:
        async with aiohttp.ClientSession() as session:
            while True:
                with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError):
                    at = time.time()
                    self.points.append({**await self._point(session), "t": at})
                await asyncio.sleep(self.interval_s)

    def summary(self, window: tuple[float, float] | None = None) -> dict[str, Any]:
        """`window` (Unix start, end): the measured window, for the engine's generated and
        computed tokens and its steps per second inside it (a real vLLM's counters; None for
        the simulator or without it)."""

        def stats(key: str) -> dict[str, float | None]:
            values = [p[key] for p in self.points if key in p]
            if not values:
                return {"mean": None, "max": None}
            return {"mean": statistics.fmean(values), "max": max(values)}

        return {
            "samples": len(self.points),
            "kv_cache_usage": stats("kv"),
            "engine_running": stats("running"),
            "engine_waiting": stats("waiting"),
            "gpu_util": stats("util"),
            **{
                f"{key}_in_window_{'sps' if key == 'steps' else 'tps'}": (
                    counter_rate(self.points, key, *window) if window else None
                )
                for key in ENGINE_COUNTERS
            },
        }


def step_fidelity(before: dict[str, Any], after: dict[str, Any]) -> dict[str, float | None]:
    """Measured / modelled wall time of the simulator's back-to-back steps during the arm
    (1.0 = it kept the model's pace; well above 1 = it was starved of CPU)."""
    b, a = before.get("steps", {}), after.get("steps", {})
    modelled = float(a.get("modelled_s", 0)) - float(b.get("modelled_s", 0))
    measured = float(a.get("measured_s", 0)) - float(b.get("measured_s", 0))
    late = float(a.get("late_s", 0)) - float(b.get("late_s", 0))
    steps = int(a.get("timed", 0)) - int(b.get("timed", 0))
    return {
        "steps": steps,
        "measured_over_modelled": measured / modelled if modelled > 0 else None,
        "mean_late_ms": 1000 * late / steps if steps > 0 else None,
    }


@dataclass
class GatewaySampler:
    """Polls the gateway's /metrics during an arm: per tier, the requests queued in the gateway
    and the released ones still awaiting their first token (the slots of
    admission.max_awaiting_first_token); and for the arm's trace, the awaiting limit and the
    slots reserved for the most urgent tier (`t`: when, Unix seconds)."""

    gateway_url: str
    interval_s: float = SAMPLE_INTERVAL_S
    points: list[dict[str, dict[str, float]]] = field(default_factory=list)

    async def run(self) -> None:
        url = self.gateway_url + "/metrics"
        wanted = {
            "tiergate_queue_depth": "queued",
            "tiergate_awaiting_first_token": "awaiting",
            "tiergate_awaiting_limit": "limit",
            "tiergate_reserved_slots": "reserved",
        }
        async with aiohttp.ClientSession() as session:
            while True:
                with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError):
                    async with session.get(url) as resp:
                        text = await resp.text()
                    at = time.time()
                    point: dict[str, dict[str, float]] = {v: {} for v in wanted.values()}
                    point["t"] = {"": at}
                    for family in families(text, wanted):
                        for sample in family.samples:
                            if sample.name in wanted:
                                tier = sample.labels.get("tier", "")
                                point[wanted[sample.name]][tier] = float(sample.value)
                    self.points.append(point)
                await asyncio.sleep(self.interval_s)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"samples": len(self.points)}
        for kind in ("queued", "awaiting"):
            tiers = sorted({t for p in self.points for t in p[kind]})
            out[f"{kind}_mean"] = {
                t: statistics.fmean(p[kind].get(t, 0.0) for p in self.points) for t in tiers
            }
        return out
