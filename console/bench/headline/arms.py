"""One arm = a fresh engine (+ a fresh gateway for gateway arms) and one replay of the workload
against it, with the engine's and gateway's own figures taken around it.

The arms themselves are defined in catalog.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.bench.headline import telemetry
from console.bench.headline.catalog import Arm
from console.bench.headline.procs import VllmEngine, run_engine
from console.bench.headline.workload import MODEL, TIERS, engine_flags
from loadgen import RequestSample, RunResult, run_workload


@dataclass
class Setup:
    """What every arm shares: the workload and the engine's pace."""

    rate: float
    duration_s: float
    warmup_s: float
    seed: int
    time_scale: float
    prompts_file: Path
    workdir: Path
    vllm: VllmEngine | None = None  # None: the simulator

    @property
    def engine(self) -> str:
        """ "sim" | "vllm" (workload.ENGINES)."""
        return "sim" if self.vllm is None else "vllm"


def tokens_in_window(samples: Iterable[RequestSample], start: float, duration_s: float) -> float:
    """Output tokens streamed per second in [start, start + duration_s], whatever the request
    and whenever it was sent (pure). The client keeps no time per token, so a request's first
    token counts at its first-token time and the rest are spread evenly until its end.

    Requests done in the window count a short request as much as a long one, so an arm that
    finishes online's short requests in the window and leaves offline's long ones for the
    drain looks better by them than by the work its engine did; tokens do not."""
    end = start + duration_s
    total = 0.0
    for s in samples:
        n = s.output_tokens or 0
        if not s.ok or n <= 0 or s.ttft is None or s.e2e is None:
            continue
        first, last = s.send_time + s.ttft, s.send_time + s.e2e
        total += 1.0 if start <= first <= end else 0.0
        if n > 1 and last > first:
            overlap = min(end, last) - max(start, first)
            total += (n - 1) * max(0.0, overlap) / (last - first)
        elif n > 1 and start <= last <= end:
            total += n - 1
    return total / duration_s


@dataclass
class ArmOutcome:
    arm: Arm
    result: RunResult
    engine_flags: list[str]
    duration_s: float
    engine: dict[str, Any] = field(default_factory=dict)
    rejections: dict[str, dict[str, int]] = field(default_factory=dict)

    def tier_row(self, tier: str) -> dict[str, Any]:
        """The figures issue 9 asks for, for one tier (or "overall"); times in ms."""
        s = self.result.summary.get(tier) or {}

        def ms(group: str, pct: str) -> float | None:
            value = (s.get(group) or {}).get(pct)
            return None if value is None else 1000 * value

        if tier == "overall":
            rejected = sum(sum(r.values()) for r in self.rejections.values())
        else:
            rejected = sum(self.rejections.get(tier, {}).values())
        return {
            "requests": s.get("count", 0),
            "done_in_window_rps": self.done_in_window_rps(None if tier == "overall" else tier),
            "tokens_in_window_tps": self.tokens_in_window_tps(None if tier == "overall" else tier),
            "completed": s.get("completed", 0),
            "errors": s.get("errors", 0),
            "rejected": rejected,
            "ttft_p50_ms": ms("ttft_s", "p50"),
            "ttft_p99_ms": ms("ttft_s", "p99"),
            "e2e_p99_ms": ms("e2e_s", "p99"),
            "request_throughput_rps": s.get("request_throughput_rps"),
            "output_tokens_per_s": s.get("output_throughput_tps"),
        }

    def done_in_window_rps(self, tier: str | None = None) -> float:
        """Requests finished per second inside the measured window, whenever they were sent
        (warmup included). Unlike the loadgen's figure (measured requests over a window that
        stretches until the last one ends), it does not count the drain after the deadline,
        so it is the engine's delivery rate in steady state."""
        start = self.result.window[0]
        end = start + self.duration_s
        done = sum(
            1
            for s in self.result.samples
            if s.ok and start <= s.end_time <= end and (tier is None or s.tier == tier)
        )
        return done / self.duration_s

    def tokens_in_window_tps(self, tier: str | None = None) -> float:
        """Output tokens streamed per second inside the measured window (tokens_in_window)."""
        return tokens_in_window(
            (s for s in self.result.samples if tier is None or s.tier == tier),
            self.result.window[0],
            self.duration_s,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            **self.arm.record(),
            "tier_config": self.arm.gateway_config(self.engine_flags),
            "engine_flags": self.engine_flags,
            "tiers": {t: self.tier_row(t) for t in (*TIERS, "overall")},
            "engine": self.engine,
            "gateway_rejections": self.rejections,
            "window": list(self.result.window),
            "client_validity": {
                "flags": self.result.validity.get("flags", []),
                "client_cpu_ratio": self.result.validity.get("client_cpu_ratio"),
                "loop_lag_p99_s": self.result.validity.get("loop_lag_p99_s"),
            },
        }


async def drive(
    spec: Any, engine_url: str, gateway_url: str | None, simulated: bool, trace: Path
) -> tuple[RunResult, dict[str, Any], dict[str, Any] | None]:
    """Replay the workload while sampling the engine (and the gateway) once a second; the
    samples, timestamped, go to `trace` (JSON) so that an arm's tail can be placed in time."""
    sampler = telemetry.KvSampler(engine_url, simulated)
    gateway = telemetry.GatewaySampler(gateway_url) if gateway_url else None
    tasks = [asyncio.create_task(sampler.run())]
    if gateway is not None:
        tasks.append(asyncio.create_task(gateway.run()))
    try:
        result = await run_workload(spec)
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    points = {"engine": sampler.points, "gateway": gateway.points if gateway else None}
    trace.write_text(json.dumps(points), encoding="utf-8")
    window = (result.window[0], result.window[0] + spec.duration_s) if spec.duration_s else None
    return result, sampler.summary(window), gateway.summary() if gateway is not None else None


def run_arm(
    arm: Arm, setup: Setup, *, duration_s: float | None = None, concurrency: int | None = None
) -> ArmOutcome:
    """Start the arm's processes, replay the workload, collect every figure, stop them."""
    flags = engine_flags(arm.policy, setup.time_scale, setup.seed, setup.engine)
    simulated = setup.engine == "sim"
    with (
        run_engine(MODEL, flags, setup.workdir, arm.name, setup.vllm) as engine_url,
        arm.front(engine_url, flags, setup.workdir) as target,
    ):
        spec = arm.spec(
            target,
            prompts_file=setup.prompts_file,
            rate=None if concurrency else setup.rate,
            concurrency=concurrency,
            duration_s=duration_s or setup.duration_s,
            warmup_s=setup.warmup_s,
            seed=setup.seed,
        )
        gpu0 = telemetry.sim_gpu(engine_url) if simulated else {}
        counters0 = telemetry.engine_counters(engine_url)
        result, kv, gateway_queues = asyncio.run(
            drive(
                spec,
                engine_url,
                target if arm.via_gateway else None,
                simulated,
                setup.workdir / f"{arm.name}-trace.json",
            )
        )
        gpu1 = telemetry.sim_gpu(engine_url) if simulated else {}
        counters1 = telemetry.engine_counters(engine_url)
        rejections = telemetry.gateway_rejections(target) if arm.via_gateway else {}
    delta = {k: counters1[k] - counters0[k] for k in counters0}
    engine = {
        **kv,
        "preemptions": int(delta["preemptions"]),
        "prefix_cache_hit_rate": (
            delta["prefix_hits"] / delta["prefix_queries"] if delta["prefix_queries"] else None
        ),
        "step_fidelity": telemetry.step_fidelity(gpu0, gpu1),  # None for a real engine
        "gpu": gpu1.get("name"),
        "gateway_queues": gateway_queues,
    }
    return ArmOutcome(arm, result, flags, duration_s or setup.duration_s, engine, rejections)
