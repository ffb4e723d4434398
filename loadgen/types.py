"""Records the load generator produces: one sample per request, progress, the run's result."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass(slots=True)
class ItlStats:
    """Inter-token-latency gaps of one request, summarised (seconds)."""

    count: int = 0
    mean: float | None = None
    p50: float | None = None
    p99: float | None = None
    max: float | None = None


@dataclass(slots=True)
class RequestSample:
    """One request as the client saw it. Durations in seconds; `send_time` is unix seconds."""

    index: int
    send_time: float
    tier: str | None = None
    stage: int = 0
    warmup: bool = False
    scheduled_time: float | None = None  # unix time the schedule wanted it sent
    dispatch_lag: float = 0.0  # send_time - scheduled_time (>= 0)
    ttft: float | None = None
    e2e: float | None = None
    tpot: float | None = None
    itl: ItlStats = field(default_factory=ItlStats)
    itl_raw: list[float] | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    content_chunks: int = 0  # chunks with a token: content, reasoning or a tool call
    usage_missing: bool = False  # output_tokens fell back to the content chunk count
    # Thinking models: reasoning tokens as `usage.completion_tokens_details` reports them
    # (None when it does not; they are part of output_tokens), and the reasoning chunks seen.
    reasoning_tokens: int | None = None
    reasoning_chunks: int = 0
    # Content chunks that reached the socket in the same TCP segment as the one before (sent
    # together, or merged while the socket went unread): those ITL gaps read 0.
    merged_gaps: int = 0
    first_token_merged: bool = False  # the first content chunk shares its time with the next
    status: int | None = None
    error: str | None = None
    response_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def end_time(self) -> float:
        return self.send_time + (self.e2e or 0.0)

    def to_dict(self, *, with_itl_raw: bool = True) -> dict[str, Any]:
        data = asdict(self)
        if not with_itl_raw:
            data["itl_raw"] = None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestSample:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        itl = values.get("itl")
        if isinstance(itl, dict):
            values["itl"] = ItlStats(**itl)
        return cls(**values)


@dataclass(frozen=True, slots=True)
class Progress:
    percent: float
    elapsed_s: float
    requests_done: int
    errors: int
    current_p99_ttft_s: float | None


@dataclass(slots=True)
class RunResult:
    spec: dict[str, Any]
    started_at: float  # unix
    finished_at: float  # unix
    window: tuple[float, float]  # measured window (unix start, unix end)
    samples: list[RequestSample]
    summary: dict[str, Any]
    timeseries: list[dict[str, Any]]
    validity: dict[str, Any]
    cancelled: bool = False
    stages: list[dict[str, Any]] = field(default_factory=list)  # per ladder step, if any

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> RunResult:
        """The inverse of `to_json_dict` (a run's JSON file, e.g. a headline arm's)."""
        return cls(
            spec=data["spec"],
            started_at=data["started_at"],
            finished_at=data["finished_at"],
            window=(data["window"][0], data["window"][1]),
            samples=[RequestSample.from_dict(s) for s in data["samples"]],
            summary=data["summary"],
            timeseries=data["timeseries"],
            validity=data["validity"],
            cancelled=data.get("cancelled", False),
            stages=data.get("stages", []),
        )

    def to_json_dict(self, *, with_samples: bool = True) -> dict[str, Any]:
        keep_raw = bool(self.spec.get("keep_itl_raw"))
        return {
            "spec": self.spec,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "window": list(self.window),
            "cancelled": self.cancelled,
            "summary": self.summary,
            "timeseries": self.timeseries,
            "validity": self.validity,
            "stages": self.stages,
            "samples": (
                [s.to_dict(with_itl_raw=keep_raw) for s in self.samples] if with_samples else []
            ),
        }
