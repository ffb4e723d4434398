"""One arm = a fresh engine (+ a fresh gateway for gateway arms) and one replay of the workload
against it, with the engine's and gateway's own figures taken around it.

The experiment's arms are defined once, here: `standard_arms()` (arm (e) is made by the search,
search.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.bench.headline import telemetry
from console.bench.headline.procs import (
    GATEWAY_KEY,
    ROOT,
    VllmEngine,
    run_engine,
    run_gateway,
    run_relay,
)
from console.bench.headline.workload import (
    MODEL,
    SEED_TIER_CONFIG,
    TIER_PRIORITY,
    TIERS,
    arm_spec,
    engine_flags,
    engine_sequences,
    with_admission,
    with_queue,
)
from loadgen import RequestSample, RunResult, run_workload


@dataclass(frozen=True)
class Arm:
    key: str  # "a".."e"
    name: str  # short slug, used for files and run labels
    title: str
    policy: str  # the engine's --scheduling-policy
    tier_config: dict[str, Any] | None = None  # None: straight to the engine
    send_priority: bool = False  # the client sets vLLM's `priority` per tier itself
    relay: bool = False  # through the bare relay (gpu_agent.relay_floor), no gateway
    at_rev: bool = False  # the gateway as at Options.gateway_rev (Setup.gateway_source)
    # >0: the gateway's max_in_flight is the engine's --max-num-seqs (as the agent sets it from
    # a launch profile) and its last `reserve_sequences` are `reserved_slots`.
    reserve_sequences: int = 0
    reserve_follows_arrivals: bool = False  # that reserve stands one slot per recent arrival
    reserve_caps_lower_tiers: bool = False  # it caps every request but online's own instead
    # max_in_flight left at the gateway's default, above the engine's: online may wait in the
    # engine's priority queue, and the capped reserve counts against the sequences the gateway
    # learns from /metrics (scheduler/rooms.py, `_slot_room`).
    urgent_waits_in_engine: bool = False
    gateway_flags: tuple[str, ...] = ()  # more of the agent's command-line flags

    @property
    def via_gateway(self) -> bool:
        return self.tier_config is not None

    def gateway_config(self, flags: list[str]) -> dict[str, Any] | None:
        """The tier config the arm's gateway runs against an engine started with `flags`."""
        if self.tier_config is None or not self.reserve_sequences:
            return self.tier_config
        extra = {"reserve_follows_arrivals": True} if self.reserve_follows_arrivals else {}
        if self.reserve_caps_lower_tiers:
            extra["reserve_caps_lower_tiers"] = True
        if not self.urgent_waits_in_engine:
            extra["max_in_flight"] = engine_sequences(flags)
        return with_admission(self.tier_config, reserved_slots=self.reserve_sequences, **extra)


def standard_arms() -> list[Arm]:
    """Arms (a)-(d) of issue 9; (e) comes from the search (search.py)."""
    return [
        Arm("a", "direct-fcfs", "engine direct, fcfs", "fcfs"),
        Arm("b", "direct-priority", "engine direct, priority policy, priority per tier",
            "priority", send_priority=True),
        Arm("c", "gateway-seed-fcfs", "gateway (seed 000 tiers), engine fcfs", "fcfs",
            SEED_TIER_CONFIG),
        Arm("d", "gateway-seed-priority",
            "gateway (seed 000 tiers), engine priority, priority passed through", "priority",
            SEED_TIER_CONFIG),
        # Issue 16: the starvation bound raised so that offline gets its arrival share.
        Arm("f", "gateway-share-priority",
            "gateway (seed 000 tiers, admission.min_share 0.1), engine priority", "priority",
            with_admission(SEED_TIER_CONFIG, min_share=0.1)),
        # Issue 16: the age bound on offline (promoted one tier up after 1 s).
        Arm("g", "gateway-age-priority",
            "gateway (seed 000 tiers, offline promote_after_ms 1000), engine priority",
            "priority", with_queue(SEED_TIER_CONFIG, "offline", promote_after_ms=1000)),
        # Issue 16: (d) without the recovery reserve, to pair with (d) in one run.
        Arm("h", "gateway-noreserve-priority",
            "gateway (seed 000 tiers, admission.recovery_reserve 0), engine priority",
            "priority", with_admission(SEED_TIER_CONFIG, recovery_reserve=0)),
        # Issue 16: (d) without the starvation bound (strict priority, as the engine alone):
        # what serving the lower tiers their share costs online, paired with (d) in one run.
        Arm("s", "gateway-noshare-priority",
            "gateway (seed 000 tiers, admission.min_share 0), engine priority", "priority",
            with_admission(SEED_TIER_CONFIG, min_share=0)),
        # Issue 16: a standing reserve. Against a priority engine an urgent request still
        # waits for a running sequence to end (neither vLLM nor the simulator preempts for
        # one); (k) keeps one of the engine's sequences from the less urgent tiers at all times.
        Arm("k", "gateway-reserve1-priority",
            "gateway (seed 000 tiers, max_in_flight = the engine's max_num_seqs, "
            "reserved_slots 1), engine priority", "priority", SEED_TIER_CONFIG,
            reserve_sequences=1),
        # (k) with a larger reserve: in a saturated round the online P99 is one burst of online
        # arrivals waiting for running sequences to end, and how long depends on how many
        # long lower-tier sequences hold the engine then (docs/performance.md, "Where an
        # online P99 comes from"). (m) keeps 6 of vLLM's 16 from batch and offline.
        Arm("m", "gateway-reserve6-priority",
            "gateway (seed 000 tiers, max_in_flight = the engine's max_num_seqs, "
            "reserved_slots 6), engine priority", "priority", SEED_TIER_CONFIG,
            reserve_sequences=6),
        # (m) with half its reserve: on shared cores (m) cut online TTFT P99 but the engine ran
        # about 10.5 sequences and throughput fell to x0.86 (docs/performance.md, "Inside the
        # gateway on shared cores"); (n) asks where between (k) and (m) the balance lies.
        Arm("n", "gateway-reserve3-priority",
            "gateway (seed 000 tiers, max_in_flight = the engine's max_num_seqs, "
            "reserved_slots 3), engine priority", "priority", SEED_TIER_CONFIG,
            reserve_sequences=3),
        # (m) whose reserve follows online's arrivals (one slot per online request of the last
        # 2 s): the same reserve while online arrives, every sequence for batch and offline
        # when it does not (the drain after the window, a lull). (m) held the lower tiers'
        # drain to 10 of 16 sequences and lost throughput by requests per second.
        Arm("q", "gateway-reserve6follow-priority",
            "gateway (seed 000 tiers, max_in_flight = the engine's max_num_seqs, "
            "reserved_slots 6 following online's arrivals), engine priority", "priority",
            SEED_TIER_CONFIG, reserve_sequences=6, reserve_follows_arrivals=True),
        # (q) with half its reserve: on its own core (q) cut online TTFT P99 to x0.68 of (b)'s
        # over 14 rounds, but the engine ran about 11 of its 16 sequences while online arrived
        # and streamed x0.95 the output tokens in the window; (w) asks whether 3 keeps most
        # of the gain for less (docs/performance.md, "The target read with its intervals").
        # Measured: docs/performance.md, "The smaller reserve (w)" (own core and shared cores).
        Arm("w", "gateway-reserve3follow-priority",
            "gateway (seed 000 tiers, max_in_flight = the engine's max_num_seqs, "
            "reserved_slots 3 following online's arrivals), engine priority", "priority",
            SEED_TIER_CONFIG, reserve_sequences=3, reserve_follows_arrivals=True),
        # (w) with the agent leaving vLLM's helpers (API server, engine-core process) where
        # they are, free to run on its OpenMP core: the agent's default moves them beside
        # itself (--fence-engine-helpers; docs/performance.md, "vLLM's helpers on its OpenMP core").
        Arm("x", "gateway-reserve3follow-nofence-priority",
            "gateway as (w), vLLM's helpers left where they are (--no-fence-engine-helpers), "
            "engine priority", "priority", SEED_TIER_CONFIG, reserve_sequences=3,
            reserve_follows_arrivals=True, gateway_flags=("--no-fence-engine-helpers",)),
        # (q) whose reserve caps batch's and offline's sequences at 16 - 6 instead of keeping
        # the last 6 of all 16 from them: online's requests take from the reserve, so the
        # engine runs 10 plus online's, not 10 in all. (m) and (q) left the engine at about
        # 10 of 16 in the window and lost 4-13% of the work done there.
        Arm("u", "gateway-reserve6cap-priority",
            "gateway (seed 000 tiers, max_in_flight = the engine's max_num_seqs, "
            "reserved_slots 6 following online's arrivals, capping the lower tiers), engine "
            "priority", "priority", SEED_TIER_CONFIG, reserve_sequences=6,
            reserve_follows_arrivals=True, reserve_caps_lower_tiers=True),
        # (u) without max_in_flight pinned to the engine's 16: (u)'s online tail waited in the
        # gateway for a lower-tier stream to end, then for the hand-off (the end seen, the
        # request sent, the engine's next step). Here online waits in vLLM's own queue, first
        # there, and the cap on batch and offline counts against the 16 the gateway reads from
        # vLLM's /metrics. Measured: at (b)'s P99 on shared cores, where (u) was worse, and
        # below (b)'s throughput (docs/performance.md, "Where online waits").
        Arm("v", "gateway-reserve6cap-engineq-priority",
            "gateway (seed 000 tiers, reserved_slots 6 following online's arrivals, capping "
            "the lower tiers at the engine's sequences less the reserve; online may queue in "
            "the engine), engine priority", "priority", SEED_TIER_CONFIG, reserve_sequences=6,
            reserve_follows_arrivals=True, reserve_caps_lower_tiers=True,
            urgent_waits_in_engine=True),
        # A change to the gateway judged against another revision in the same paired rounds:
        # (d) with the gateway's packages as at --gateway-rev (procs.gateway_source).
        Arm("r", "gateway-rev-priority",
            "gateway at --gateway-rev (seed 000 tiers), engine priority, priority passed "
            "through", "priority", SEED_TIER_CONFIG, at_rev=True),
        # The A/A check: (b) once more, so that a run measures how far two identical arms
        # land apart (perf.headline --rounds judges it against (b) like any other arm).
        Arm("i", "direct-priority-again", "engine direct, priority policy (b again, A/A)",
            "priority", send_priority=True),
        # The hop's floor: (b) through a bare relay on the gateway's own HTTP stack, so that a
        # run splits the gateway's distance from (b) into the hop's and the rest's.
        Arm("p", "relay-floor-priority",
            "bare relay (the gateway's hop alone), engine priority, priority per tier",
            "priority", send_priority=True, relay=True),
    ]  # fmt: skip


def arm_keys() -> str:
    """Every arm --arms may name: the standard ones and the search's (e)."""
    return "".join(sorted({arm.key for arm in standard_arms()} | {"e"}))


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
    gateway_source: Path | None = None  # arm (r)'s gateway packages (procs.gateway_source)
    gateway_trace: bool = False  # the gateway's --trace, to ARM-gateway-trace.jsonl

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
            "key": self.arm.key,
            "name": self.arm.name,
            "title": self.arm.title,
            "engine_policy": self.arm.policy,
            "via_gateway": self.arm.via_gateway,
            "client_sends_priority": self.arm.send_priority,
            "via_relay": self.arm.relay,
            "gateway_at_rev": self.arm.at_rev,
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
    with run_engine(MODEL, flags, setup.workdir, arm.name, setup.vllm) as engine_url:
        if arm.tier_config is not None:
            source = setup.gateway_source if arm.at_rev else None
            if arm.at_rev and source is None:
                raise ValueError(f"arm ({arm.key}): needs a gateway revision (--gateway-rev)")
            gateway = run_gateway(
                engine_url,
                arm.gateway_config(flags),
                setup.workdir,
                arm.name,
                source or ROOT,
                trace=setup.gateway_trace,
                flags=arm.gateway_flags,
            )
        elif arm.relay:
            gateway = run_relay(engine_url, setup.workdir, arm.name)
        else:
            gateway = contextlib.nullcontext(engine_url)
        with gateway as target:
            spec = arm_spec(
                base_url=target,
                prompts_file=setup.prompts_file,
                rate=None if concurrency else setup.rate,
                concurrency=concurrency,
                duration_s=duration_s or setup.duration_s,
                warmup_s=setup.warmup_s,
                seed=setup.seed,
                api_key=GATEWAY_KEY if arm.via_gateway else None,
                tier_priority=TIER_PRIORITY if arm.send_priority else None,
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
