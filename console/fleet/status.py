"""A node's status from what its heartbeats said: the one rule the fleet page, the node page,
the API and rollouts all use (pure: the facts and `now` come in, a NodeStatus value goes out).

    new       never heard from
    stale     not heard from within `stale_after_s`
    down      the agent reports its engine down
    degraded  heard from, but gateway or engine not ok, or an apply error nobody acknowledged
    healthy   heard from recently, gateway and engine ok, no open apply error
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from console.fleet.choices import NodeStatus

# Kinds whose apply errors are about a desired version (the others, e.g. gateway_keys or a
# reload of the local tier-config file, are kept whatever is desired).
VERSIONED_KINDS = ("tier_config", "launch_profile")


def node_status(
    *,
    last_seen_at: datetime | None,
    health: Mapping[str, Any] | None,
    open_errors: Mapping[str, Any] | None,
    now: datetime,
    stale_after_s: float,
) -> str:
    if last_seen_at is None:
        return NodeStatus.NEW
    if (now - last_seen_at).total_seconds() > stale_after_s:
        return NodeStatus.STALE
    health = health or {}
    if health.get("engine") == "down":
        return NodeStatus.DOWN
    if health.get("engine") != "ok" or health.get("gateway") != "ok" or open_errors:
        return NodeStatus.DEGRADED
    return NodeStatus.HEALTHY


def open_errors(
    errors: Mapping[str, Any] | None, acknowledged: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The apply errors an operator has not acknowledged (an acknowledgement covers exactly
    the error it was given for: a new failure of the same kind shows again)."""
    acknowledged = acknowledged or {}
    return {kind: e for kind, e in (errors or {}).items() if acknowledged.get(kind) != e}


def relevant_errors(errors: Mapping[str, Any], desired: Mapping[str, int | None]) -> dict[str, Any]:
    """The agent's apply errors that still concern what the console desires: an error about a
    tier config or launch profile version no longer desired is history, not a problem (the
    agent drops it too, docs/protocol.md; this spares the beat in between)."""
    out: dict[str, Any] = {}
    for kind, entry in errors.items():
        if kind in VERSIONED_KINDS and (
            desired.get(kind) is None
            or not isinstance(entry, Mapping)
            or entry.get("version") != desired.get(kind)
        ):
            continue
        out[kind] = entry
    return out


def kept_acknowledgements(
    acknowledged: Mapping[str, Any] | None, errors: Mapping[str, Any]
) -> dict[str, Any]:
    """Acknowledgements of errors still reported; the rest lapse, so that the same error
    coming back later (after a retry) is shown again."""
    return {kind: e for kind, e in (acknowledged or {}).items() if errors.get(kind) == e}
