"""The agent's own Prometheus exposition (docs/architecture.md#telemetry; names described in
docs/metrics.md) and the per-interval tier figures each heartbeat sample carries.

Two kinds of figures:
- events the gateway records as they happen (histograms and counters below, plus
  `IntervalStats`, which keeps the requests finished in the current one-second interval);
- state read at scrape time (queue depth, in-flight, GPU, engine): `AgentCollector` asks the
  scheduler and the latest telemetry sample when /metrics is scraped, so nothing has to keep
  gauges in step with the dispatcher.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from scheduler import QUEUE_FULL, QUEUE_TIMEOUT, SchedulerStats
from scheduler.stats import nearest_rank

# LLM first tokens range from milliseconds (short prompt, idle engine) to tens of seconds.
TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# Outcomes for tiergate_requests_total{status}.
OK = "ok"
ERROR = "error"
REJECTED = "rejected"
CANCELLED = "cancelled"
CLIENT_TIMEOUT = "client_timeout"  # the engine answered; the client stopped reading
# The gateway's own refusals for overload (docs/admission.md, "Overload"): a full queue (429,
# `max_queue_depth`) and the sojourn bound (503, `queue_timeout_ms` or `shed_after_ms`). Counted
# as shed, apart from errors, so an operator sees what the overload defaults turned away.
SHED_REASONS = (QUEUE_FULL, QUEUE_TIMEOUT)


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an already sorted list (the scheduler's); None when empty."""
    return nearest_rank(sorted_values, q) if sorted_values else None


@dataclass
class _TierInterval:
    finished: int = 0
    errors: int = 0
    rejected: int = 0
    ttfts: list[float] = field(default_factory=list)


class IntervalStats:
    """Requests finished since the last `take()`, per tier: what a rollout's SLO guard reads."""

    def __init__(self) -> None:
        self._tiers: dict[str, _TierInterval] = {}

    def _tier(self, tier: str) -> _TierInterval:
        entry = self._tiers.get(tier)
        if entry is None:
            entry = self._tiers[tier] = _TierInterval()
        return entry

    def finished(self, tier: str, ttft_s: float | None, ok: bool) -> None:
        entry = self._tier(tier)
        entry.finished += 1
        if not ok:
            entry.errors += 1
        if ttft_s is not None:
            entry.ttfts.append(ttft_s)

    def rejected(self, tier: str) -> None:
        self._tier(tier).rejected += 1

    def take(self) -> dict[str, dict[str, Any]]:
        tiers, self._tiers = self._tiers, {}
        out: dict[str, dict[str, Any]] = {}
        for name, entry in tiers.items():
            ttfts = sorted(entry.ttfts)
            out[name] = {
                "finished": entry.finished,
                "errors": entry.errors,
                "rejected": entry.rejected,
                "ttft_p50_s": percentile(ttfts, 0.50),
                "ttft_p99_s": percentile(ttfts, 0.99),
            }
        return out


class GatewayMetrics:
    """Event metrics recorded by the gateway; one registry per agent (tests run several)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.ttft = Histogram(
            "tiergate_ttft_seconds",
            "Gateway time to first token: request received to first content chunk sent.",
            ["tier"],
            buckets=TTFT_BUCKETS,
            registry=registry,
        )
        self.queue_wait = Histogram(
            "tiergate_queue_wait_seconds",
            "Time a request spent in the gateway's tier queue before release to the engine.",
            ["tier"],
            buckets=WAIT_BUCKETS,
            registry=registry,
        )
        self.requests = Counter(
            "tiergate_requests",
            "Requests that reached a tier, by outcome (ok, error, rejected, cancelled, "
            "client_timeout).",
            ["tier", "status"],
            registry=registry,
        )
        self.rejections = Counter(
            "tiergate_rejections",
            "Requests refused by the scheduler or for lack of an engine, by reason.",
            ["tier", "reason"],
            registry=registry,
        )
        self.shed = Counter(
            "tiergate_shed",
            "Requests the gateway shed for overload, by reason: queue_full (429, the tier's "
            "max_queue_depth), queue_timeout (503, queue_timeout_ms or admission.shed_after_ms).",
            ["tier", "reason"],
            registry=registry,
        )
        self.tokens = Counter(
            "tiergate_tokens",
            "Tokens reported in the engine's usage, by kind (prompt, completion).",
            ["tier", "kind"],
            registry=registry,
        )
        self.auth_failures = Counter(
            "tiergate_auth_failures",
            "Requests refused before reaching a tier (bad key, tier not allowed).",
            ["reason"],
            registry=registry,
        )
        self.interval = IntervalStats()

    def rejected(self, tier: str, reason: str) -> None:
        self.rejections.labels(tier, reason).inc()
        if reason in SHED_REASONS:
            self.shed.labels(tier, reason).inc()
        self.requests.labels(tier, REJECTED).inc()
        self.interval.rejected(tier)

    def released(self, tier: str, wait_s: float) -> None:
        self.queue_wait.labels(tier).observe(wait_s)

    def finished(
        self,
        tier: str,
        status: str,
        ttft_s: float | None,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
    ) -> None:
        self.requests.labels(tier, status).inc()
        if ttft_s is not None:
            self.ttft.labels(tier).observe(ttft_s)
        if prompt_tokens:
            self.tokens.labels(tier, "prompt").inc(prompt_tokens)
        if completion_tokens:
            self.tokens.labels(tier, "completion").inc(completion_tokens)
        if status not in (CANCELLED, CLIENT_TIMEOUT):  # the client's doing, not the engine's
            self.interval.finished(tier, ttft_s, status == OK)


class AgentCollector(Collector):
    """Gauges read at scrape time from the scheduler and the latest telemetry sample."""

    def __init__(
        self,
        scheduler_stats: Callable[[], SchedulerStats],
        latest_sample: Callable[[], dict[str, Any] | None],
        versions: Callable[[], dict[str, int | None]],
        engine_health: Callable[[], str],
    ) -> None:
        self._scheduler_stats = scheduler_stats
        self._latest_sample = latest_sample
        self._versions = versions
        self._engine_health = engine_health

    def collect(self) -> Iterator[Metric]:
        yield from self._scheduler()
        yield from self._config()
        up = GaugeMetricFamily("tiergate_engine_up", "1 when the engine answers /health.")
        up.add_metric([], 1.0 if self._engine_health() == "ok" else 0.0)
        yield up
        sample = self._latest_sample()
        if sample is not None:
            yield from self._gpus(sample)
            yield from self._engine(sample)

    def _scheduler(self) -> Iterator[Metric]:
        stats = self._scheduler_stats()
        depth = GaugeMetricFamily(
            "tiergate_queue_depth", "Requests queued per tier.", labels=["tier"]
        )
        in_flight = GaugeMetricFamily(
            "tiergate_in_flight", "Released requests not finished yet, per tier.", labels=["tier"]
        )
        awaiting = GaugeMetricFamily(
            "tiergate_awaiting_first_token",
            "In-flight requests still waiting for their first token, per tier.",
            labels=["tier"],
        )
        wait = GaugeMetricFamily(
            "tiergate_effective_wait_seconds",
            "The tier's batching wait now in force (reduced under adaptive pressure).",
            labels=["tier"],
        )
        padding = GaugeMetricFamily(
            "tiergate_batch_padding_ratio",
            "Padding share of the tier's last release (1 - mean/max prompt length).",
            labels=["tier"],
        )
        for name, tier in stats.tiers.items():
            depth.add_metric([name], tier.depth)
            in_flight.add_metric([name], tier.in_flight)
            awaiting.add_metric([name], tier.awaiting_first_token)
            wait.add_metric([name], tier.effective_wait_s)
            if tier.last_padding_ratio is not None:
                padding.add_metric([name], tier.last_padding_ratio)
        limit = GaugeMetricFamily(
            "tiergate_max_in_flight", "The admission cap on requests at the engine."
        )
        limit.add_metric([], stats.max_in_flight)
        awaiting_limit = GaugeMetricFamily(
            "tiergate_awaiting_limit",
            "The limit in force on released requests awaiting their first token (adapted "
            "unless admission.max_awaiting_first_token is set).",
        )
        awaiting_limit.add_metric([], stats.max_awaiting_first_token)
        reserved = GaugeMetricFamily(
            "tiergate_reserved_slots",
            "Slots the less urgent tiers leave to the most urgent one now (admission."
            "reserved_slots, or the engine sequences the recovery reserve keeps after an "
            "overload).",
        )
        reserved.add_metric([], stats.reserved_slots)
        yield from (depth, in_flight, awaiting, wait, padding, limit, awaiting_limit, reserved)

    def _config(self) -> Iterator[Metric]:
        version = GaugeMetricFamily(
            "tiergate_config_version",
            "Applied version id per kind (tier_config, launch_profile); -1 when none.",
            labels=["kind"],
        )
        for kind, value in self._versions().items():
            version.add_metric([kind], -1 if value is None else value)
        yield version

    def _gpus(self, sample: dict[str, Any]) -> Iterator[Metric]:
        source = str(sample.get("gpu_source", "none"))
        specs = (
            ("util", "tiergate_gpu_utilization_ratio", "GPU utilisation, 0 to 1.", 1.0),
            ("mem_used_bytes", "tiergate_gpu_memory_used_bytes", "GPU memory in use.", 1.0),
            ("mem_total_bytes", "tiergate_gpu_memory_total_bytes", "GPU memory in all.", 1.0),
            ("power_w", "tiergate_gpu_power_watts", "GPU power draw.", 1.0),
            ("temp_c", "tiergate_gpu_temperature_celsius", "GPU temperature.", 1.0),
            ("sm_clock_mhz", "tiergate_gpu_sm_clock_hertz", "GPU SM clock.", 1e6),
        )
        for key, name, doc, scale in specs:
            family = GaugeMetricFamily(name, doc, labels=["gpu", "source"])
            for gpu in sample.get("gpus", []):
                value = gpu.get(key)
                if value is not None:
                    family.add_metric([str(gpu.get("index", 0)), source], float(value) * scale)
            yield family

    def _engine(self, sample: dict[str, Any]) -> Iterator[Metric]:
        engine = sample.get("engine") or {}
        specs = (
            ("kv_cache_usage", "tiergate_engine_kv_cache_usage_ratio", "Engine KV cache in use."),
            ("running", "tiergate_engine_requests_running", "Requests the engine is running."),
            ("waiting", "tiergate_engine_requests_waiting", "Requests in the engine's queue."),
            ("prefix_hit_rate", "tiergate_engine_prefix_cache_hit_ratio", "Prefix cache hits."),
        )
        for key, name, doc in specs:
            family = GaugeMetricFamily(name, doc)
            if engine.get(key) is not None:
                family.add_metric([], float(engine[key]))
            yield family
        preemptions = CounterMetricFamily(
            "tiergate_engine_preemptions", "Engine preemptions since it started."
        )
        if engine.get("preemptions_total") is not None:
            preemptions.add_metric([], float(engine["preemptions_total"]))
        yield preemptions


class ControlCollector(Collector):
    """The control path's state, for alerts: outstanding apply errors per kind (0 or 1, so a
    rule sees the series before anything fails) and, in console mode, the last accepted
    heartbeat (absent in standalone mode, which has no console to be stale towards)."""

    KINDS = ("tier_config", "launch_profile", "gateway_keys")

    def __init__(
        self,
        apply_errors: Callable[[], dict[str, Any]],
        heartbeat: Callable[[], tuple[float | None, int] | None],
    ) -> None:
        self._apply_errors = apply_errors
        self._heartbeat = heartbeat

    def collect(self) -> Iterator[Metric]:
        errors = self._apply_errors()
        failing = GaugeMetricFamily(
            "tiergate_apply_error",
            "1 while the desired version of this kind could not be applied.",
            labels=["kind"],
        )
        for kind in (*self.KINDS, *sorted(set(errors) - set(self.KINDS))):
            failing.add_metric([kind], 1.0 if kind in errors else 0.0)
        yield failing
        heartbeat = self._heartbeat()
        if heartbeat is None:
            return
        last_success, failures = heartbeat
        last = GaugeMetricFamily(
            "tiergate_heartbeat_last_success_timestamp_seconds",
            "Unix time of the last heartbeat the console accepted (0 before the first).",
        )
        last.add_metric([], last_success or 0.0)
        failed = GaugeMetricFamily(
            "tiergate_heartbeat_consecutive_failures",
            "Heartbeats refused or unanswered since the last accepted one.",
        )
        failed.add_metric([], failures)
        yield from (last, failed)
