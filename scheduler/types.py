"""Plain data exchanged with the dispatcher: requests, rejections, poll results and stats."""

from __future__ import annotations

from dataclasses import dataclass, field

QUEUE_FULL = "queue_full"
QUEUE_TIMEOUT = "queue_timeout"
SHUTTING_DOWN = "shutting_down"


@dataclass(frozen=True, slots=True)
class Request:
    """One client request as the dispatcher sees it. `id` must be unique while it is held."""

    id: str
    tier: str
    prompt_tokens: int
    max_tokens: int


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a request will not be served: `status` is the HTTP status the gateway answers with,
    `retry_after_s` the Retry-After hint (only for a full queue)."""

    reason: str
    status: int
    retry_after_s: float | None = None
    detail: str = ""


@dataclass(slots=True)
class PollResult:
    released: list[Request]
    rejected: list[tuple[Request, Rejection]]
    next_wakeup: float | None  # absolute time of the next timer-driven decision, None: no timer
    # ids of released requests that went ahead of a more urgent tier by the starvation bound
    # (`admission.min_share`); the gateway sends them with the most urgent tier's engine
    # priority, or the engine's own priority queue would starve them again.
    promoted: list[str] = field(default_factory=list)
    # ids of released requests promoted by their tier's age bound (`promote_after_ms`).
    aged: list[str] = field(default_factory=list)
    # Every released request of a tier with an age bound, with the tier one step more urgent
    # whose engine priority it carries (the gateway orders it; the engine must not put it
    # behind every more urgent request released after it).
    sent_as: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReleaseRecord:
    """One release (batch) from a tier: how many requests, tokens, and padding share."""

    tier: str
    at: float
    size: int
    tokens: int
    padding_ratio: float


@dataclass(frozen=True, slots=True)
class WaitSummary:
    """Queue-wait durations (seconds) of the most recent released requests of a tier."""

    count: int
    mean_s: float | None
    p50_s: float | None
    p90_s: float | None
    p99_s: float | None
    max_s: float | None


@dataclass(frozen=True, slots=True)
class TierStats:
    name: str
    priority: int
    depth: int  # queued requests
    queued_tokens: int  # their prompt + max tokens
    in_flight: int
    awaiting_first_token: int
    effective_wait_s: float
    adaptive_active: bool  # the reduced wait is in force now
    ready: bool
    released: int
    cancelled: int
    rejections: dict[str, int]
    queue_wait: WaitSummary
    last_padding_ratio: float | None
    release_share: float | None = None  # share of the last SHARE_WINDOW releases
    # Share of their engine work (prompt + max tokens): what the starvation bound compares.
    work_share: float | None = None


@dataclass(frozen=True, slots=True)
class SchedulerStats:
    now: float
    in_flight: int
    awaiting_first_token: int
    max_in_flight: int
    max_awaiting_first_token: int  # the current limit, adapted or fixed
    reserved_slots: int
    tiers: dict[str, TierStats]
    recent_releases: list[ReleaseRecord] = field(default_factory=list)
    awaiting_limit_adaptive: bool = False
    first_token_baseline_s: float | None = None  # the limiter's no-queue first-token latency
    first_token_recent_s: float | None = None  # its recent (weighted mean) first-token latency
    engine_waiting: int | None = None  # the engine's last reported waiting count
    # The backed-up most urgent tier's feed as of the last poll (None: not backed up, or no
    # feed: an FCFS engine or a fixed limit); scheduler/awaiting.py.
    awaiting_feed: int | None = None
    # The engine's sequence limit as learned from /metrics (the most it ran while it queued;
    # scheduler/reserve.py), None until such a reading: what the recovery reserve keeps of.
    engine_sequences: int | None = None
