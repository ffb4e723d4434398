"""Tiergate's scheduler: the tier config schema and the tiered dispatcher
(docs/architecture.md#tier-config and #the-dispatchers-semantics).

A pure library (stdlib + pydantic): no I/O besides `load_config_file`, no clock reads in the
state machine. Public API, all importable from `scheduler`:

Config (scheduler.config)::

    parse_config(data: Mapping[str, Any], *, default_max_in_flight: int | None = None) -> TierConfig
    load_config_file(path: str | Path) -> TierConfig        # bad JSON: ConfigError with line/column
    config_to_dict(cfg: TierConfig) -> dict[str, Any]   # only given fields: the seed round-trips
    diff_configs(old: TierConfig, new: TierConfig) -> list[Change]   # Change(path, old, new)
    default_config() -> TierConfig                          # the seed's online/batch/offline
    ConfigError(ValueError): .errors: list[FieldError]; FieldError(path, message);
        str(err) = one "path: message" line per error, e.g.
        "scheduler.queues.batch.priority: must differ from queues.online.priority"

Dispatcher (scheduler.dispatcher), times are float seconds from a monotonic clock::

    Request(id: str, tier: str, prompt_tokens: int, max_tokens: int)      # frozen
    d = Dispatcher(config: TierConfig, *, default_max_in_flight: int = 256)
    d.arrive(req, now) -> Rejection | None
        # queue full: Rejection("queue_full", 429, retry_after_s)
                                              # unknown tier or duplicate id: ValueError
    d.poll(now) -> PollResult(released: list[Request],
                              rejected: list[tuple[Request, Rejection]],  # "queue_timeout",
                                  # 503 + Retry-After (queue_timeout_ms or shed_after_ms)
                              next_wakeup: float | None,   # timeouts and age bounds only
                              promoted: list[str],         # released by the min_share bound
                              aged: list[str],             # released by promote_after_ms
                              sent_as: dict[str, str])     # id -> tier whose priority it takes
        # work-conserving: while a slot is free nothing waits (docs/admission.md)
    d.first_token(req_id, now, *, timed=True) -> None   # timed: a latency sample for the limit
    d.engine_waiting(count, now, *, running=None) -> None  # num_requests_waiting / _running
    d.engine_policy(*, priority: bool) -> None  # the engine's policy (priority or fcfs), as
                                              # learned; kept across reconfigure
    d.engine_priority -> bool                 # config's pass_priority and the engine's policy
    d.max_awaiting -> int                     # the awaiting limit in force (scheduler.limiter)
    d.complete(req_id, now) -> bool           # frees the slot; False if not in flight
    d.cancel(req_id, now) -> bool             # queued: leaves the queue; in flight: frees the slot
    d.reconfigure(config, now) -> None        # drops nothing; a removed tier's requests move to
                                              # the least urgent remaining tier (d.tier_of(id))
    d.stats(now) -> SchedulerStats            # plain dataclasses, per tier TierStats

Asyncio driver (scheduler.driver), for the gateway::

    drv = AsyncDispatcher(dispatcher, clock=time.monotonic)
    ticket = await drv.acquire(req)           # raises Rejected (.rejection, .reason, .status,
                                              #   .retry_after_s); cancellation-safe
    ticket.first_token(timed=True); ticket.release()    # release is idempotent
    ticket.promoted                           # released by the starvation bound
    ticket.sent_as                            # the tier whose engine priority it carries, or None
    drv.engine_waiting(count, *, running=None)  # from the agent's /metrics scrape
    drv.engine_policy(*, priority)            # the agent pushes what it learned of the engine
    async with ticket: ...                    # releases on exit
    drv.reconfigure(config); drv.stats(); drv.start(); await drv.aclose()

The driver runs no background task: it polls after every event and keeps one `loop.call_at`
timer for the dispatcher's next wake-up. `aclose()` refuses waiters with "shutting_down" (503).

Command line: `python -m scheduler validate FILE...`, `python -m scheduler diff OLD NEW`.
"""

from __future__ import annotations

from scheduler.config import (
    AdaptiveConfig,
    AdmissionConfig,
    Change,
    ConfigError,
    FieldError,
    QueueConfig,
    SchedulerConfig,
    TierConfig,
    config_to_dict,
    default_config,
    diff_configs,
    load_config_file,
    parse_config,
    without_removed,
)
from scheduler.dispatcher import Dispatcher
from scheduler.driver import AsyncDispatcher, Rejected, Ticket
from scheduler.types import (
    QUEUE_FULL,
    QUEUE_TIMEOUT,
    SHUTTING_DOWN,
    PollResult,
    Rejection,
    ReleaseRecord,
    Request,
    SchedulerStats,
    TierStats,
    WaitSummary,
)

__all__ = [
    "QUEUE_FULL",
    "QUEUE_TIMEOUT",
    "SHUTTING_DOWN",
    "AdaptiveConfig",
    "AdmissionConfig",
    "AsyncDispatcher",
    "Change",
    "ConfigError",
    "Dispatcher",
    "FieldError",
    "PollResult",
    "QueueConfig",
    "Rejected",
    "Rejection",
    "ReleaseRecord",
    "Request",
    "SchedulerConfig",
    "SchedulerStats",
    "Ticket",
    "TierConfig",
    "TierStats",
    "WaitSummary",
    "config_to_dict",
    "default_config",
    "diff_configs",
    "load_config_file",
    "parse_config",
    "without_removed",
]
