"""Tier config schema (docs/architecture.md#tier-config): parse, validate, serialise and diff.

The seed's JSON is accepted verbatim; every extension has a default so that file stays valid.
`config_to_dict` writes back only the fields that were given (or explicitly set), so a seed file
round-trips identical in shape.

Validation collects every problem at once, each as a `FieldError` with a dotted path from the
document root ("scheduler.queues.batch.priority") and the rule it breaks ("must differ from
queues.online.priority"), so the console can show each error beside its field. Here: the
schema, the rules spanning several fields, and parsing, serialising and diffing a config;
`FieldError`, `ConfigError` and the wording of pydantic's errors are in scheduler/errors.py
(importable from here too).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, TypeGuard

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
)

# Re-exported: callers import a config's errors from here or from `scheduler`.
from scheduler.errors import ConfigError as ConfigError
from scheduler.errors import FieldError as FieldError
from scheduler.errors import field_errors as field_errors
from scheduler.errors import field_message as field_message

DEFAULT_MAX_IN_FLIGHT = 256
_QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

PositiveInt = Annotated[StrictInt, Field(gt=0)]
NonNegativeInt = Annotated[StrictInt, Field(ge=0)]
# Millisecond values may be fractional; strict mode still refuses strings and booleans.
PositiveMs = Annotated[StrictInt | StrictFloat, Field(gt=0, allow_inf_nan=False)]
PaceMs = Annotated[StrictInt | StrictFloat, Field(gt=0, le=1000, allow_inf_nan=False)]
StreamTokens = Annotated[StrictInt, Field(ge=1, le=1024)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class QueueConfig(_Strict):
    max_batch_size: PositiveInt
    max_waiting_time_ms: PositiveMs
    max_tokens_per_batch: PositiveInt
    priority: StrictInt
    max_queue_depth: PositiveInt | None = None  # None: unbounded
    queue_timeout_ms: PositiveMs | None = None  # None: a queued request never times out
    length_groups: list[PositiveInt] = Field(
        default_factory=list
    )  # prompt-token upper bounds, increasing
    # The age bound (docs/admission.md): a request of this tier queued this long is released
    # as the next more urgent tier's (its slot rules and vLLM priority). None: never.
    promote_after_ms: PositiveMs | None = None
    # After a stream's first token, the gateway reads the engine for it at most once this
    # often, so the client gets the tokens made meanwhile in one piece: fewer reads, writes and
    # wake-ups on the node, for a tier that wants throughput (docs/admission.md). None: each
    # piece as it comes. At most a second: a client still sees the stream move.
    stream_pace_ms: PaceMs | None = None
    # The engine itself sends this tier's streams in pieces of this many tokens, the first
    # token and the end at once (vLLM's per-request `stream_interval`, which the gateway writes
    # into the body): fewer pieces made, sent, read and relayed on the node (docs/admission.md).
    # None: the engine's own interval (one token unless its launch sets one).
    stream_interval_tokens: StreamTokens | None = None


class AdaptiveConfig(_Strict):
    enabled: StrictBool = False
    online_pressure_threshold: NonNegativeInt = 10
    # Range checked in _cross_field_errors so the message can say "(0, 1]".
    wait_time_reduction_ratio: Annotated[StrictInt | StrictFloat, Field(allow_inf_nan=False)] = 0.5
    tier: str = "online"


# The starvation bound's default: a floor against starving a tier to zero, not a fair share.
# At 0.05, on a real vLLM past its knee, the offline share's long requests cost online TTFT
# P99 x1.13 of engine priority alone and x0.95 the requests; without the bound the gateway was
# x0.65 (docs/admission.md, "What the share costs online").
DEFAULT_MIN_SHARE = 0.01
# Overload (docs/admission.md): the most urgent tier whose oldest queued request has waited this
# long is backed up, and while its backlog is also more than the engine clears soon
# (scheduler/rooms.py) it releases newest first; a queued request this old is shed (503 +
# Retry-After) unless its queue sets its own `queue_timeout_ms`.
DEFAULT_LIFO_AFTER_MS = 1000
DEFAULT_SHED_AFTER_MS = 30000
# Recovery (scheduler/reserve.py): for this long after the most urgent tier was backed up, the
# less urgent tiers leave this share of the engine's sequences to it.
DEFAULT_RECOVERY_RESERVE = 0.5
DEFAULT_RECOVERY_HOLD_MS = 10000
Share = Annotated[StrictInt | StrictFloat, Field(allow_inf_nan=False)]


class AdmissionConfig(_Strict):
    max_in_flight: PositiveInt | None = None  # None: the caller's default (max_num_seqs or 256)
    # None: adapted to what the gateway observes (scheduler/limiter.py); a number: a hard cap.
    max_awaiting_first_token: PositiveInt | None = None
    reserved_slots: NonNegativeInt = 0
    # False: the reserved slots always stand (docs/architecture.md#the-dispatchers-semantics). True:
    # at most one per request of the most urgent tier that arrived in the last 2 s
    # (scheduler/reserve.py, `Reserve`).
    reserve_follows_arrivals: StrictBool = False
    # False: the less urgent tiers may not take the last reserved slots of all in flight
    # (docs/architecture.md#the-dispatchers-semantics). True: every request but the most urgent
    # tier's own, sent as its own, counts against a cap of the engine's sequences (learned from
    # /metrics, at most max_in_flight) - reserved slots, and those take from the reserve
    # (scheduler/reserve.py, `Reserve.slot_room`).
    reserve_caps_lower_tiers: StrictBool = False
    pass_priority: StrictBool = True
    # The starvation bound: every less urgent tier with queued requests gets at least this
    # share of the recent releases' engine work (prompt + max tokens), even while a more
    # urgent tier is ready (0: strict priority). Range checked in _cross_field_errors so the
    # message can say what the bound depends on.
    min_share: Share = DEFAULT_MIN_SHARE
    lifo_after_ms: PositiveMs | None = DEFAULT_LIFO_AFTER_MS  # None: FIFO always
    shed_after_ms: PositiveMs | None = DEFAULT_SHED_AFTER_MS  # None: no default sojourn bound
    # Range checked in _cross_field_errors ([0, 1)); 0 or a null hold: no recovery reserve.
    recovery_reserve: Share = DEFAULT_RECOVERY_RESERVE
    recovery_hold_ms: PositiveMs | None = DEFAULT_RECOVERY_HOLD_MS


class SchedulerConfig(_Strict):
    queues: dict[str, QueueConfig] = Field(min_length=1)
    adaptive: AdaptiveConfig = AdaptiveConfig()
    admission: AdmissionConfig = AdmissionConfig()


class TierConfig(_Strict):
    """The whole document: ``{"scheduler": {...}}``. Build it with `parse_config`."""

    scheduler: SchedulerConfig

    def tiers_by_urgency(self) -> list[str]:
        """Queue names, most urgent (smallest priority number) first."""
        queues = self.scheduler.queues
        return sorted(queues, key=lambda name: queues[name].priority)


@dataclass(frozen=True)
class Change:
    path: str
    old: Any
    new: Any


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _cross_field_errors(
    data: Mapping[str, Any], default_max_in_flight: int | None
) -> list[FieldError]:
    """Rules spanning several fields, checked on the raw document so that they are reported
    together with type errors elsewhere (pydantic stops before model-level checks)."""
    errors: list[FieldError] = []
    sched = data.get("scheduler")
    if not isinstance(sched, Mapping):
        return errors
    queues = sched.get("queues")
    queues = queues if isinstance(queues, Mapping) else {}
    seen: dict[int, str] = {}
    for name, queue in queues.items():
        if isinstance(name, str) and not _QUEUE_NAME.fullmatch(name):
            # Names travel in dotted paths, metric labels and the X-Tiergate-Tier header.
            errors.append(
                FieldError(
                    f"scheduler.queues.{name}", "name must be 1-64 letters, digits, '-' or '_'"
                )
            )
        if not isinstance(queue, Mapping):
            continue
        prio = queue.get("priority")
        if _is_int(prio):
            if prio in seen:
                errors.append(
                    FieldError(
                        f"scheduler.queues.{name}.priority",
                        f"must differ from queues.{seen[prio]}.priority",
                    )
                )
            else:
                seen[prio] = name
        groups = queue.get("length_groups")
        if (
            isinstance(groups, list | tuple)
            and all(_is_int(g) for g in groups)
            and any(b <= a for a, b in pairwise(groups))
        ):
            errors.append(
                FieldError(f"scheduler.queues.{name}.length_groups", "must be strictly increasing")
            )
    errors.extend(_promotion_errors(queues, sched.get("admission")))
    adaptive = sched.get("adaptive")
    if isinstance(adaptive, Mapping):
        ratio = adaptive.get("wait_time_reduction_ratio")
        if _is_number(ratio) and math.isfinite(ratio) and not (0 < ratio <= 1):
            errors.append(
                FieldError("scheduler.adaptive.wait_time_reduction_ratio", "must be in (0, 1]")
            )
        tier = adaptive.get("tier", "online")
        if isinstance(tier, str) and queues and tier not in queues:
            names = ", ".join(str(n) for n in queues)
            errors.append(
                FieldError("scheduler.adaptive.tier", f"must name a queue (one of: {names})")
            )
    admission = sched.get("admission")
    if isinstance(admission, Mapping):
        reserved = admission.get("reserved_slots", 0)
        cap = admission.get("max_in_flight")
        if cap is None:
            cap = default_max_in_flight
        if _is_int(reserved) and _is_int(cap) and cap > 0 and reserved >= cap:
            errors.append(
                FieldError(
                    "scheduler.admission.reserved_slots",
                    f"must be below max_in_flight ({cap})",
                )
            )
        reserve = admission.get("recovery_reserve", DEFAULT_RECOVERY_RESERVE)
        if _is_number(reserve) and math.isfinite(reserve) and not 0 <= reserve < 1:
            errors.append(FieldError("scheduler.admission.recovery_reserve", "must be in [0, 1)"))
        share = admission.get("min_share", DEFAULT_MIN_SHARE)
        if _is_number(share) and math.isfinite(share):
            others = max(1, len(queues) - 1)
            if share < 0:
                errors.append(FieldError("scheduler.admission.min_share", "must be >= 0"))
            elif share * others >= 1:
                # The shares owed to the less urgent tiers must leave some room to the first.
                errors.append(
                    FieldError(
                        "scheduler.admission.min_share",
                        f"must be below 1 / {others} (one share for each of the {others} "
                        "less urgent queues)",
                    )
                )
    return errors


def _ms(value: object) -> float | None:
    return float(value) if _is_number(value) and math.isfinite(value) and value > 0 else None


def _promotion_errors(queues: Mapping[str, Any], admission: object) -> list[FieldError]:
    """The age bound and the overload bounds must be able to take effect."""
    errors: list[FieldError] = []
    adm = admission if isinstance(admission, Mapping) else {}
    lifo = _ms(adm.get("lifo_after_ms", DEFAULT_LIFO_AFTER_MS))
    shed = _ms(adm.get("shed_after_ms", DEFAULT_SHED_AFTER_MS))
    if lifo is not None and shed is not None and shed <= lifo:
        errors.append(
            FieldError(
                "scheduler.admission.shed_after_ms",
                f"must be above lifo_after_ms ({lifo:g}), or no backlog is ever served newest "
                "first",
            )
        )
    prios = {
        name: q["priority"]
        for name, q in queues.items()
        if isinstance(q, Mapping) and _is_int(q.get("priority"))
    }
    first = min(prios, key=lambda n: prios[n]) if prios else None
    for name, queue in queues.items():
        if not isinstance(queue, Mapping):
            continue
        promote = _ms(queue.get("promote_after_ms"))
        if promote is None:
            continue
        path = f"scheduler.queues.{name}.promote_after_ms"
        if name == first:
            errors.append(FieldError(path, "the most urgent queue has no one to go ahead of"))
            continue
        timeout = _ms(queue.get("queue_timeout_ms"))
        bound, field = (
            (timeout, "queue_timeout_ms")
            if timeout is not None
            else (shed, "admission.shed_after_ms")
        )
        if bound is not None and promote >= bound:
            errors.append(FieldError(path, f"must be below {field} ({bound:g})"))
    return errors


def parse_config(
    data: Mapping[str, Any], *, default_max_in_flight: int | None = None
) -> TierConfig:
    """Validate a decoded JSON document; raise `ConfigError` listing every broken rule.

    `default_max_in_flight`, when known (the launch profile's max_num_seqs), is what
    `reserved_slots` is checked against if the document sets no `max_in_flight`.
    """
    if not isinstance(data, Mapping):
        raise ConfigError([FieldError("(root)", "must be an object")])
    errors: list[FieldError] = []
    config: TierConfig | None = None
    try:
        config = TierConfig.model_validate(dict(data))
    except ValidationError as exc:
        errors.extend(field_errors(exc))
    errors.extend(_cross_field_errors(data, default_max_in_flight))
    if errors or config is None:
        raise ConfigError(errors)
    return config


def load_config_file(path: str | Path) -> TierConfig:
    """Read and validate a JSON file. Bad JSON raises `ConfigError` with line and column."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            [FieldError("", f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}")]
        ) from exc
    return parse_config(data)


def config_to_dict(config: TierConfig) -> dict[str, Any]:
    """The JSON-ready document, holding only fields that were given or set explicitly."""
    return config.model_dump(mode="json", exclude_unset=True)


def effective_dict(config: TierConfig) -> dict[str, Any]:
    """The JSON-ready document with every default filled in."""
    return config.model_dump(mode="json")


def default_config() -> TierConfig:
    """The seed's three tiers (docs/architecture.md#tier-config)."""
    return parse_config(
        {
            "scheduler": {
                "queues": {
                    "online": {
                        "max_batch_size": 8,
                        "max_waiting_time_ms": 10,
                        "max_tokens_per_batch": 4096,
                        "priority": 1,
                    },
                    "batch": {
                        "max_batch_size": 32,
                        "max_waiting_time_ms": 50,
                        "max_tokens_per_batch": 16384,
                        "priority": 2,
                    },
                    "offline": {
                        "max_batch_size": 64,
                        "max_waiting_time_ms": 200,
                        "max_tokens_per_batch": 32768,
                        "priority": 3,
                    },
                },
                "adaptive": {
                    "enabled": True,
                    "online_pressure_threshold": 10,
                    "wait_time_reduction_ratio": 0.5,
                },
            }
        }
    )


def _same(a: Any, b: Any) -> bool:
    # 10 and 10.0 are the same setting; JSON does not distinguish them meaningfully.
    if _is_number(a) and _is_number(b):
        return math.isclose(float(a), float(b), rel_tol=0.0, abs_tol=0.0)
    return bool(a == b) and type(a) is type(b)


def _diff(path: str, old: Any, new: Any, out: list[Change]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in list(old) + [k for k in new if k not in old]:
            sub = f"{path}.{key}"
            if key not in new:
                out.append(Change(sub, old[key], None))
            elif key not in old:
                out.append(Change(sub, None, new[key]))
            else:
                _diff(sub, old[key], new[key], out)
    elif not _same(old, new):
        out.append(Change(path, old, new))


def diff_configs(old: TierConfig, new: TierConfig) -> list[Change]:
    """Changes between two configs, compared with defaults filled in, one per leaf field
    (a whole queue when one was added or removed). Paths start at "scheduler"."""
    out: list[Change] = []
    _diff("scheduler", effective_dict(old)["scheduler"], effective_dict(new)["scheduler"], out)
    return out
