"""The workload: what to send, how fast, for how long. A plain dataclass with a JSON form."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from functools import cache
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError

TIER_HEADER_DEFAULT = "X-Tiergate-Tier"
ENDPOINTS = ("chat", "completions")
ARRIVALS = ("poisson", "constant")


class SpecError(ValueError):
    """A workload option is invalid; the message names the field."""


@dataclass(slots=True)
class Stage:
    concurrency: int
    duration_s: float


@dataclass(slots=True)
class WorkloadSpec:
    # from_dict checks types with pydantic (lax: "8" is 8), finite numbers only.
    __pydantic_config__ = ConfigDict(allow_inf_nan=False)

    base_url: str
    model: str
    api_key: str | None = None
    endpoint: str = "chat"
    # Load shape: fixed concurrency, an arrival rate, or a ladder of concurrency stages.
    concurrency: int | None = None
    rate: float | None = None
    arrival: str = "poisson"
    stages: list[Stage] = field(default_factory=list)
    # Limits: measured requests (after warmup) or measured seconds (after warmup).
    requests: int | None = None
    duration_s: float | None = None
    warmup_s: float = 0.0
    # Request content.
    prompt_tokens: int = 128
    max_tokens: int = 128
    shared_prefix_tokens: int = 0
    prompts_file: str | None = None
    stream: bool = True
    temperature: float | None = None
    seed: int = 0
    # Leads every prompt (the shared prefix too), so a run never finds an earlier run's
    # prompts in the engine's prefix cache; the same salt reproduces the same prompts. "" is
    # none: the library leaves the choice to its caller, and both callers draw a fresh one per
    # run (the command line, cli.new_salt, unless told `--salt ''`; the console's runs).
    salt: str = ""
    tier_mix: dict[str, float] = field(default_factory=dict)
    tier_header: str = TIER_HEADER_DEFAULT
    # vLLM's `priority` body field per tier (lower runs first under --scheduling-policy
    # priority), for benchmarking an engine's own priority queue without a gateway.
    tier_priority: dict[str, int] = field(default_factory=dict)
    # vLLM's `stream_interval` per tier (its streams sent that many tokens a piece), for
    # benchmarking the engine's own interval without a gateway.
    tier_stream_interval: dict[str, int] = field(default_factory=dict)
    timeout_s: float = 600.0
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    keep_itl_raw: bool = False
    # Client processes the streams are split over (one event loop each; see shards.py).
    processes: int = 1

    def __post_init__(self) -> None:
        self.stages = [s if isinstance(s, Stage) else Stage(**s) for s in self.stages]
        self.validate()

    def validate(self) -> None:
        if not self.base_url:
            raise SpecError("base_url: required")
        if not self.model:
            raise SpecError("model: required")
        if self.endpoint not in ENDPOINTS:
            raise SpecError(f"endpoint: must be one of {', '.join(ENDPOINTS)}")
        if self.arrival not in ARRIVALS:
            raise SpecError(f"arrival: must be one of {', '.join(ARRIVALS)}")
        shapes = sum(x is not None and x != [] for x in (self.concurrency, self.rate, self.stages))
        if shapes > 1:
            raise SpecError("concurrency: give only one of concurrency, rate, stages")
        if self.concurrency is not None and self.concurrency < 1:
            raise SpecError("concurrency: must be >= 1")
        if self.rate is not None and not (self.rate > 0 and math.isfinite(self.rate)):
            raise SpecError("rate: must be > 0")
        for i, stage in enumerate(self.stages):
            if stage.concurrency < 1 or stage.duration_s <= 0:
                raise SpecError(f"stages[{i}]: need concurrency >= 1 and seconds > 0")
        if self.stages and self.duration_s is not None:
            raise SpecError("duration_s: the stages define the duration")
        if not self.stages and self.requests is None and self.duration_s is None:
            raise SpecError("requests: give requests or duration_s (or stages)")
        if self.requests is not None and self.requests < 1:
            raise SpecError("requests: must be >= 1")
        if self.duration_s is not None and self.duration_s <= 0:
            raise SpecError("duration_s: must be > 0")
        if self.warmup_s < 0:
            raise SpecError("warmup_s: must be >= 0")
        if self.stages and self.warmup_s >= self.total_stage_s:
            raise SpecError("warmup_s: must be shorter than the stages")
        if self.prompt_tokens < 1 or self.max_tokens < 1:
            raise SpecError("prompt_tokens: prompt_tokens and max_tokens must be >= 1")
        if not 0 <= self.shared_prefix_tokens <= self.prompt_tokens:
            raise SpecError("shared_prefix_tokens: must be between 0 and prompt_tokens")
        if len(self.salt) > 64 or self.salt != self.salt.strip():
            raise SpecError("salt: at most 64 characters, no leading or trailing space")
        if self.processes < 1:
            raise SpecError("processes: must be >= 1")
        if self.timeout_s <= 0:
            raise SpecError("timeout_s: must be > 0")
        for tier, weight in self.tier_mix.items():
            if not tier or weight < 0 or not math.isfinite(weight):
                raise SpecError(f"tier_mix.{tier}: weight must be >= 0")
        if self.tier_mix and sum(self.tier_mix.values()) <= 0:
            raise SpecError("tier_mix: weights sum to zero")
        for tier, priority in self.tier_priority.items():
            if not tier or isinstance(priority, bool) or not isinstance(priority, int):
                raise SpecError(f"tier_priority.{tier}: must be an integer")
        for tier, tokens in self.tier_stream_interval.items():
            if not tier or isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
                raise SpecError(f"tier_stream_interval.{tier}: must be an integer >= 1")

    @property
    def total_stage_s(self) -> float:
        return sum(s.duration_s for s in self.stages)

    @property
    def max_concurrency(self) -> int:
        """Upper bound on requests in flight, for sizing the connection pool."""
        if self.stages:
            return max(s.concurrency for s in self.stages)
        if self.concurrency is not None:
            return self.concurrency
        if self.rate is not None:
            # Open-loop arrivals: in flight ~ rate x latency; leave room, the pool is only a cap.
            return max(64, int(self.rate * 60))
        return 1

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["api_key"] = None  # never persist or log the key
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkloadSpec:
        """A workload from JSON: unknown fields, wrong types and broken rules all raise
        SpecError naming the field (``stages[0].duration_s: ...``)."""
        if not isinstance(data, dict):
            raise SpecError("workload: must be an object")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpecError(f"{unknown[0]}: unknown workload field")
        try:
            spec: WorkloadSpec = _adapter().validate_python(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            cause = (err.get("ctx") or {}).get("error")
            if isinstance(cause, SpecError):  # a rule of validate(), already worded
                raise cause from None
            raise SpecError(f"{_path(err['loc'])}: {err['msg']}") from None
        return spec


@cache
def _adapter() -> TypeAdapter[WorkloadSpec]:
    return TypeAdapter(WorkloadSpec)


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "workload"


def parse_tier_mix(text: str) -> dict[str, float]:
    """`online=0.7,batch=0.2,offline=0.1` -> {"online": 0.7, ...}."""
    mix: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, weight = part.partition("=")
        if not sep or not name.strip():
            raise SpecError(f"tier_mix: expected name=weight, got {part!r}")
        try:
            mix[name.strip()] = float(weight)
        except ValueError as exc:
            raise SpecError(f"tier_mix.{name.strip()}: not a number: {weight!r}") from exc
    return mix


def parse_tier_priority(text: str) -> dict[str, int]:
    """`online=1,batch=2` -> {"online": 1, "batch": 2}: vLLM priorities are integers."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = (x.strip() for x in part.partition("="))
        if not sep or not name:
            raise SpecError(f"tier_priority: expected name=integer, got {part!r}")
        try:
            out[name] = int(value)
        except ValueError:
            raise SpecError(f"tier_priority.{name}: must be an integer, got {value!r}") from None
    return out


def parse_stages(text: str) -> list[Stage]:
    """`32:60,128:180` -> concurrency 32 for 60 s, then 128 for 180 s."""
    stages: list[Stage] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        conc, sep, secs = part.partition(":")
        try:
            stages.append(Stage(int(conc), float(secs)))
        except ValueError as exc:
            raise SpecError(f"stages: expected concurrency:seconds, got {part!r}") from exc
        if not sep:
            raise SpecError(f"stages: expected concurrency:seconds, got {part!r}")
    return stages


def from_seed003_settings(
    d: dict[str, Any], *, base_url: str | None = None, model: str | None = None
) -> WorkloadSpec:
    """Import seed 003's client `settings.json` (api / load_test / workload sections).

    `request_rate: 0` means "no rate limit" there, i.e. fixed concurrency. The key itself is
    never in that file (`api_key_env` names a variable); the console supplies it separately.
    Flat dicts with the same key names are accepted too.
    """
    sections = {
        "api": d["api"] if isinstance(d.get("api"), dict) else {},
        "load_test": d.get("load_test", d),
        "workload": d.get("workload", d),
    }
    for name, section in sections.items():
        if not isinstance(section, dict):
            raise SpecError(f"{name}: must be an object")

    def number(where: str, keys: tuple[str, ...], kind: type, default: Any) -> Any:
        section = sections[where]
        for key in (k for k in keys if section.get(k) is not None):
            raw = section[key]
            try:
                value = kind(raw)
                if isinstance(raw, bool) or not math.isfinite(value):
                    raise ValueError
                if kind is int and isinstance(raw, float) and not raw.is_integer():
                    raise ValueError
            except (TypeError, ValueError):
                name = f"{where}.{key}" if section is not d else key
                raise SpecError(f"{name}: must be a finite number, got {raw!r:.40}") from None
            return value
        return default

    work = sections["workload"]
    rate = number("load_test", ("request_rate",), float, 0.0)
    duration = number("load_test", ("duration_seconds", "duration"), float, None)
    url = base_url or sections["api"].get("base_url") or d.get("base_url")
    spec_model = model or work.get("model") or d.get("model")
    if not url:
        raise SpecError("base_url: not in the settings; give one")
    if not spec_model:
        raise SpecError("model: not in the settings; give one")
    return WorkloadSpec(
        base_url=str(url),
        model=str(spec_model),
        concurrency=None if rate > 0 else number("load_test", ("concurrency",), int, 1),
        rate=rate if rate > 0 else None,
        duration_s=duration or None,
        requests=None if duration else number("load_test", ("requests",), int, 100),
        warmup_s=number("load_test", ("warmup_seconds", "warmup"), float, 0.0),
        prompt_tokens=number("workload", ("prompt_tokens",), int, 128),
        max_tokens=number("workload", ("max_output_tokens", "output_tokens"), int, 128),
        stream=bool(work.get("stream", True)),
        temperature=number("workload", ("temperature",), float, None),
        timeout_s=number("api", ("timeout_seconds",), float, 600.0),
    )
