"""The tier config's rules that span several fields, the defaults they read, and the fields
the schema dropped (scheduler/config.py holds the schema and calls these).

The rules are checked on the raw document, so that they are reported together with the type
errors elsewhere in it (pydantic stops before model-level checks); each is a `FieldError` with
the dotted path of the field to fix.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from itertools import pairwise
from typing import Any, TypeGuard

from scheduler.errors import FieldError

_QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

# The starvation bound's default: a floor against starving a tier to zero, not a fair share.
# At 0.05, on a real vLLM past its knee, the offline share's long requests cost online TTFT
# P99 x1.13 of engine priority alone and x0.95 the requests; without the bound the gateway was
# x0.65 (docs/admission.md, "What the share costs online").
DEFAULT_MIN_SHARE = 0.01
# Overload (docs/admission.md): the most urgent tier whose oldest queued request has waited this
# long is backed up, and while its backlog is also more than the engine clears soon
# (scheduler/rooms.py) it releases newest first; a queued request this old is shed (503 +
# Retry-After) unless its queue sets its own `queue_timeout_ms`. Why a bound by default, and
# why 30 s: docs/admission.md, "Shed, and why the default is 30 s".
DEFAULT_LIFO_AFTER_MS = 1000
DEFAULT_SHED_AFTER_MS = 30000
# Recovery (scheduler/reserve.py): for this long after the most urgent tier was backed up, the
# less urgent tiers leave this share of the engine's sequences to it.
DEFAULT_RECOVERY_RESERVE = 0.5
DEFAULT_RECOVERY_HOLD_MS = 10000


def is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def cross_field_errors(
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
        if is_int(prio):
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
            and all(is_int(g) for g in groups)
            and any(b <= a for a, b in pairwise(groups))
        ):
            errors.append(
                FieldError(f"scheduler.queues.{name}.length_groups", "must be strictly increasing")
            )
    errors.extend(promotion_errors(queues, sched.get("admission")))
    adaptive = sched.get("adaptive")
    if isinstance(adaptive, Mapping):
        ratio = adaptive.get("wait_time_reduction_ratio")
        if is_number(ratio) and math.isfinite(ratio) and not (0 < ratio <= 1):
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
        if is_int(reserved) and is_int(cap) and cap > 0 and reserved >= cap:
            errors.append(
                FieldError(
                    "scheduler.admission.reserved_slots",
                    f"must be below max_in_flight ({cap})",
                )
            )
        reserve = admission.get("recovery_reserve", DEFAULT_RECOVERY_RESERVE)
        if is_number(reserve) and math.isfinite(reserve) and not 0 <= reserve < 1:
            errors.append(FieldError("scheduler.admission.recovery_reserve", "must be in [0, 1)"))
        share = admission.get("min_share", DEFAULT_MIN_SHARE)
        if is_number(share) and math.isfinite(share):
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
    return float(value) if is_number(value) and math.isfinite(value) and value > 0 else None


def promotion_errors(queues: Mapping[str, Any], admission: object) -> list[FieldError]:
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
        if isinstance(q, Mapping) and is_int(q.get("priority"))
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


# Fields the schema had and dropped for lack of a measured gain (docs/admission.md, "Removed
# fields"): (section, name) -> why. A config that still sets one is refused with the reason,
# not a bare "unknown field", so the operator knows it is gone on purpose and what replaces it.
REMOVED_FIELDS: dict[tuple[str, str], str] = {
    ("queues", "stream_pace_ms"): "removed: superseded by stream_interval_tokens, which has "
    "the engine itself send fewer pieces, with no timer and no late end; delete it",
    ("admission", "reserve_caps_lower_tiers"): "removed: it showed no gain (online TTFT P99 "
    "x1.137 of engine priority alone's at x0.928 the requests per second, "
    "docs/admission.md); delete it",
}


def without_removed(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A copy of a tier config document without the removed fields, and the dotted path of
    each one dropped. For documents stored before a removal (a version in the console, an
    agent's saved or desired config): they still apply, while a new write of one is refused."""
    out = dict(data)
    dropped: list[str] = []
    scheduler = out.get("scheduler")
    if not isinstance(scheduler, Mapping):
        return out, dropped
    scheduler = out["scheduler"] = dict(scheduler)
    for section, name in REMOVED_FIELDS:
        part = scheduler.get(section)
        if not isinstance(part, Mapping):
            continue
        if section == "queues":
            queues = scheduler[section] = dict(part)
            for tier, queue in part.items():
                if isinstance(queue, Mapping) and name in queue:
                    queues[tier] = {k: v for k, v in queue.items() if k != name}
                    dropped.append(f"scheduler.queues.{tier}.{name}")
        elif name in part:
            scheduler[section] = {k: v for k, v in part.items() if k != name}
            dropped.append(f"scheduler.{section}.{name}")
    return out, dropped


def removed_field(err: Mapping[str, Any]) -> str | None:
    """The message for a removed field's "unknown field" error, else None."""
    loc = tuple(err["loc"])
    if err["type"] != "extra_forbidden" or len(loc) < 3 or loc[0] != "scheduler":
        return None
    section = loc[1]
    if len(loc) != (4 if section == "queues" else 3):
        return None
    return REMOVED_FIELDS.get((str(section), str(loc[-1])))
