"""Tier config schema (docs/architecture.md#tier-config): parse, validate, serialise and diff.

The seed's JSON is accepted verbatim; every extension has a default so that file stays valid.
`config_to_dict` writes back only the fields that were given (or explicitly set), so a seed file
round-trips identical in shape.

Validation collects every problem at once, each as a `FieldError` with a dotted path from the
document root ("scheduler.queues.batch.priority") and the rule it breaks ("must differ from
queues.online.priority"), so the console can show each error beside its field. Here: the
schema (every settable field with its `description`), and parsing, serialising and diffing a
config; the rules spanning several fields, their defaults and the removed fields are in
scheduler/config_rules.py, `FieldError`, `ConfigError` and the wording of pydantic's errors
in scheduler/errors.py (all importable from here too).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
)

# Re-exported: the defaults are read by the rules and by the schema below.
from scheduler.config_rules import DEFAULT_LIFO_AFTER_MS as DEFAULT_LIFO_AFTER_MS
from scheduler.config_rules import DEFAULT_MIN_SHARE as DEFAULT_MIN_SHARE
from scheduler.config_rules import DEFAULT_RECOVERY_HOLD_MS as DEFAULT_RECOVERY_HOLD_MS
from scheduler.config_rules import DEFAULT_RECOVERY_RESERVE as DEFAULT_RECOVERY_RESERVE
from scheduler.config_rules import DEFAULT_SHED_AFTER_MS as DEFAULT_SHED_AFTER_MS
from scheduler.config_rules import REMOVED_FIELDS as REMOVED_FIELDS
from scheduler.config_rules import cross_field_errors, is_number, removed_field
from scheduler.config_rules import without_removed as without_removed

# Re-exported: callers import a config's errors from here or from `scheduler`.
from scheduler.errors import ConfigError as ConfigError
from scheduler.errors import FieldError as FieldError
from scheduler.errors import field_errors as field_errors
from scheduler.errors import field_message as field_message

DEFAULT_MAX_IN_FLIGHT = 256

PositiveInt = Annotated[StrictInt, Field(gt=0)]
NonNegativeInt = Annotated[StrictInt, Field(ge=0)]
# Millisecond values may be fractional; strict mode still refuses strings and booleans.
PositiveMs = Annotated[StrictInt | StrictFloat, Field(gt=0, allow_inf_nan=False)]
StreamTokens = Annotated[StrictInt, Field(ge=1, le=1024)]

# Every settable field carries a `description`: the form editor's help, the API's OpenAPI
# schema and the reference table in docs/admission.md (`python -m scheduler reference`) are
# all made from it, so each says what the field does, its default and when to change it.


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class QueueConfig(_Strict):
    max_batch_size: PositiveInt = Field(
        description="Seed field, required. While the engine is saturated, this many queued "
        "requests make the tier ready (it goes before less urgent tiers that are not), and one "
        "release takes at most this many. Never delays a request while a slot is free."
    )
    max_waiting_time_ms: PositiveMs = Field(
        description="Seed field, required. While the engine is saturated, the tier is ready "
        "once its oldest queued request has waited this long. Never delays a request while a "
        "slot is free; set it short (e.g. 1) on the urgent tier for strict priority."
    )
    max_tokens_per_batch: PositiveInt = Field(
        description="Seed field, required. While the engine is saturated, this many queued "
        "prompt + max tokens make the tier ready, and one release takes at most this many "
        "tokens (a larger single request goes alone)."
    )
    priority: StrictInt = Field(
        description="Seed field, required. The tier's urgency: smaller goes first, one number "
        "per queue. Also sent to the engine as vLLM's `priority` (admission.pass_priority)."
    )
    max_queue_depth: PositiveInt | None = Field(
        default=None,
        description="Most requests the gateway queues for this tier; one more is refused 429 "
        "with Retry-After and counted as shed. Default null: unbounded. Set it to bound the "
        "tier's queue under a flood.",
    )
    queue_timeout_ms: PositiveMs | None = Field(
        default=None,
        description="A request of this tier queued this long is refused 503 with Retry-After "
        "and counted as shed. Default null: admission.shed_after_ms applies. Set it for a tier "
        "whose clients give up sooner or later than that.",
    )
    length_groups: list[PositiveInt] = Field(
        default_factory=list,
        json_schema_extra={"default": []},  # a factory's default is not in the schema itself
        description="Prompt-token upper bounds, strictly increasing, that split the tier's "
        "queue into FIFO groups by prompt length (longer prompts than the last bound form one "
        "more group); a release takes the oldest request's group first, so similar lengths go "
        "out together. Default []: one group. No gain measured on a continuously batching "
        "engine: leave it empty.",
    )
    promote_after_ms: PositiveMs | None = Field(
        default=None,
        description="The age bound: a request of this tier queued this long is released as "
        "the next more urgent tier's (its engine priority and slot rules), ahead of that "
        "tier's queue. Default null: never. Not on the most urgent tier; below the tier's "
        "timeout. Set it (e.g. 1000 on offline) to serve a starved tier sooner, at a cost to "
        "the tier above.",
    )
    stream_interval_tokens: StreamTokens | None = Field(
        default=None,
        description="The engine sends this tier's streams in pieces of this many tokens (the "
        "first token and the end at once): the gateway writes vLLM's per-request "
        "`stream_interval` into the body, so fewer pieces are made, relayed and read. 1-1024; "
        "default null: the engine's own interval. Set it (e.g. 16) for a throughput tier whose "
        "clients need not see each token.",
    )


class AdaptiveConfig(_Strict):
    enabled: StrictBool = Field(
        default=False,
        description="Seed field. On: the adaptive tier's max_waiting_time_ms is cut by "
        "wait_time_reduction_ratio while its queue holds more than online_pressure_threshold "
        "requests, so it becomes ready sooner under pressure. Default false.",
    )
    online_pressure_threshold: NonNegativeInt = Field(
        default=10,
        description="Seed field. The adaptive tier's queue depth above which its wait is cut. "
        "Default 10.",
    )
    # Range checked in scheduler/config_rules.py so the message can say "(0, 1]".
    wait_time_reduction_ratio: Annotated[StrictInt | StrictFloat, Field(allow_inf_nan=False)] = (
        Field(
            default=0.5,
            description="Seed field. The factor, in (0, 1], on the adaptive tier's "
            "max_waiting_time_ms under pressure. Default 0.5.",
        )
    )
    tier: str = Field(
        default="online",
        description='The queue the adaptive rule watches and speeds up. Default "online"; '
        "must name a queue.",
    )


Share = Annotated[StrictInt | StrictFloat, Field(allow_inf_nan=False)]


class AdmissionConfig(_Strict):
    max_in_flight: PositiveInt | None = Field(
        default=None,
        description="Hard cap on requests released to the engine and not finished, all tiers "
        "together. Default null: the launch profile's max_num_seqs, else 256. Give an attached "
        "agent the engine's own sequence limit.",
    )
    max_awaiting_first_token: PositiveInt | None = Field(
        default=None,
        description="Hard cap on released requests still awaiting their first token. Default "
        "null: adapted to what the gateway observes (scheduler/limiter.py). Set it only to pin "
        "the engine's queue, e.g. in an experiment.",
    )
    reserved_slots: NonNegativeInt = Field(
        default=0,
        description="The last this many of max_in_flight are the most urgent tier's: the less "
        "urgent tiers start only while more slots than this are free. Default 0 "
        "(work-conserving); below max_in_flight. Raise it (e.g. 3 of 16) where the urgent "
        "tier's TTFT tail is worth a few per cent of throughput.",
    )
    reserve_follows_arrivals: StrictBool = Field(
        default=False,
        description="With reserved_slots: keep at most one reserved slot per request of the "
        "most urgent tier that arrived in the last 2 s, so a reserve nobody uses does not "
        "idle the engine. Default false.",
    )
    pass_priority: StrictBool = Field(
        default=True,
        description="Send each request's tier priority to the engine as vLLM's `priority` "
        "(the engine orders by it on its priority policy; one that refuses it stops getting "
        "it). Default true. Turn it off for an engine that must not see it.",
    )
    # Range checked in scheduler/config_rules.py so the message can say what the bound depends on.
    min_share: Share = Field(
        default=DEFAULT_MIN_SHARE,
        description="The starvation bound: every less urgent tier with queued requests gets "
        "at least this share of the recent releases' engine work (prompt + max tokens), even "
        "while a more urgent tier is ready. Default 0.01; 0: strict priority; below 1 / "
        "(queues - 1). Raising it costs the urgent tier's tail far more than the share.",
    )
    lifo_after_ms: PositiveMs | None = Field(
        default=DEFAULT_LIFO_AFTER_MS,
        description="Overload: while the most urgent tier's oldest queued request has waited "
        "longer than this and its backlog is more than the engine clears in 5 s, the tier "
        "releases newest first and its stale requests go as the next tier's. Default 1000; "
        "null: FIFO always.",
    )
    shed_after_ms: PositiveMs | None = Field(
        default=DEFAULT_SHED_AFTER_MS,
        description="The sojourn bound: a request queued this long, in a tier without its own "
        "queue_timeout_ms, is refused 503 with Retry-After and counted as shed. Default 30000: "
        "a client that waited 30 s has most likely gone, and a 503 it can retry beats a hang; "
        "null: wait forever (the seed's behaviour). Above lifo_after_ms.",
    )
    # Range checked in scheduler/config_rules.py ([0, 1)).
    recovery_reserve: Share = Field(
        default=DEFAULT_RECOVERY_RESERVE,
        description="After an overload of the most urgent tier, the share of the engine's "
        "sequences the less urgent tiers leave to it while the hold lasts, in [0, 1). Default "
        "0.5; 0: no recovery reserve (strictly work-conserving).",
    )
    recovery_hold_ms: PositiveMs | None = Field(
        default=DEFAULT_RECOVERY_HOLD_MS,
        description="How long the recovery reserve holds after the most urgent tier was last "
        "backed up; then it is given back one sequence a second. Default 10000; null: no "
        "recovery reserve.",
    )


class SchedulerConfig(_Strict):
    queues: dict[str, QueueConfig] = Field(
        min_length=1,
        description="The tiers, by name (1-64 letters, digits, '-' or '_'): the name a key and "
        "the X-Tiergate-Tier header select. At least one.",
    )
    adaptive: AdaptiveConfig = Field(
        default=AdaptiveConfig(), description="The seed's adaptive wait (one tier)."
    )
    admission: AdmissionConfig = Field(
        default=AdmissionConfig(), description="What reaches the engine, and when."
    )


class TierConfig(_Strict):
    """The whole document: ``{"scheduler": {...}}``. Build it with `parse_config`."""

    scheduler: SchedulerConfig = Field(
        description="The tiers and the rules that release them (docs/admission.md)."
    )

    def tiers_by_urgency(self) -> list[str]:
        """Queue names, most urgent (smallest priority number) first."""
        queues = self.scheduler.queues
        return sorted(queues, key=lambda name: queues[name].priority)


@dataclass(frozen=True)
class Change:
    path: str
    old: Any
    new: Any


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
        errors.extend(field_errors(exc, removed_field))
    errors.extend(cross_field_errors(data, default_max_in_flight))
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
    if is_number(a) and is_number(b):
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
