"""Pure rules of a rollout: which wave each node is in, and how far one node has got.

No database, no clock of its own: the executor passes the facts and `now`, so every verdict
can be tested to the millisecond without sleeping. Whether a node is healthy is the fleet's
one rule (console/fleet/status.py), the same the fleet and rollout pages show.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from console.fleet.choices import NodeStatus
from console.fleet.status import node_status, open_errors

TIER_CONFIG = "tier_config"
LAUNCH_PROFILE = "launch_profile"

# Verdicts of `progress`.
WAITING = "waiting"  # not applied yet, still within the timeout
APPLIED = "applied"  # applied, but not (yet) seen healthy
HEALTHY = "healthy"
FAILED = "failed"


def assign_waves(count: int, canary_count: int, wave_size: int) -> list[int]:
    """The wave of each of `count` nodes, in order: the first `canary_count` form wave 0 (when
    there are canaries), then waves of `wave_size` nodes (0: all the rest in one wave)."""
    waves: list[int] = []
    canaries = min(canary_count, count)
    waves.extend([0] * canaries)
    wave = 1 if canaries else 0
    rest = count - canaries
    size = wave_size if wave_size > 0 else max(rest, 1)
    for index in range(rest):
        waves.append(wave + index // size)
    return waves


@dataclass(frozen=True)
class NodeFacts:
    """What the node's heartbeats last said (fleet.Node's columns)."""

    applied: Mapping[str, int | None]
    apply_errors: Mapping[str, Any]
    health: Mapping[str, Any]
    last_seen_at: datetime | None
    acknowledged_errors: Mapping[str, Any] | None = None

    @property
    def open_errors(self) -> dict[str, Any]:
        return open_errors(self.apply_errors, self.acknowledged_errors)


@dataclass(frozen=True)
class Verdict:
    state: str
    error: str = ""


def is_fresh(facts: NodeFacts, now: datetime, fresh_s: float) -> bool:
    return facts.last_seen_at is not None and (now - facts.last_seen_at).total_seconds() <= fresh_s


def is_healthy(facts: NodeFacts, now: datetime, fresh_s: float) -> bool:
    """Heard from within `fresh_s`, gateway and engine ok, no open apply error."""
    status = node_status(
        last_seen_at=facts.last_seen_at,
        health=facts.health,
        open_errors=facts.open_errors,
        now=now,
        stale_after_s=fresh_s,
    )
    return status == NodeStatus.HEALTHY


@dataclass(frozen=True)
class Restore:
    """How one kind goes back to its state before a rollout: desire `version` (None: no
    version to wait for) and, when `unset`, end with no desired version."""

    version: int | None
    unset: bool


def restore(prev_desired: int | None, prev_applied: int | None) -> Restore:
    """Exactly the state before: the version it desired; or, when it desired none, no desired
    version, after going back to the version it ran (if the console knows one)."""
    if prev_desired is not None:
        return Restore(prev_desired, False)
    return Restore(prev_applied, True)


def apply_error(facts: NodeFacts, kind: str, version: int) -> str | None:
    """The agent's error text when it reports failing to apply this very version."""
    entry = (facts.apply_errors or {}).get(kind)
    if isinstance(entry, Mapping) and entry.get("version") == version:
        return str(entry.get("error") or "the agent reported an apply error")
    return None


def is_applied(facts: NodeFacts, targets: Mapping[str, int | None]) -> bool:
    return all(
        facts.applied.get(kind) == version
        for kind, version in targets.items()
        if version is not None
    )


def progress(
    facts: NodeFacts,
    targets: Mapping[str, int | None],
    *,
    now: datetime,
    since: datetime,
    timeout_s: float,
    fresh_s: float,
) -> Verdict:
    """Where one node stands, `since` its desired versions were set to `targets`."""
    for kind, version in targets.items():
        if version is None:
            continue
        error = apply_error(facts, kind, version)
        if error is not None:
            return Verdict(FAILED, f"{kind.replace('_', ' ')} v-id {version}: {error}")
    applied = is_applied(facts, targets)
    if applied and is_healthy(facts, now, fresh_s):
        return Verdict(HEALTHY)
    waited = (now - since).total_seconds()
    if waited > timeout_s:
        if not is_fresh(facts, now, fresh_s):
            seen = (
                "never"
                if facts.last_seen_at is None
                else f"{(now - facts.last_seen_at).total_seconds():.0f} s ago"
            )
            return Verdict(
                FAILED,
                f"timed out after {timeout_s:g} s: the agent is not reporting (last seen {seen})",
            )
        if not applied:
            return Verdict(
                FAILED,
                f"timed out after {timeout_s:g} s: "
                "the agent has not reported the new version applied",
            )
        detail = (facts.health or {}).get("detail") or ""
        errors = facts.open_errors
        if errors:
            detail = "; ".join(
                f"open {kind} apply error: {(e or {}).get('error')}" for kind, e in errors.items()
            )
        return Verdict(
            FAILED,
            f"timed out after {timeout_s:g} s: applied but not healthy "
            f"(engine {(facts.health or {}).get('engine')}){': ' + detail if detail else ''}",
        )
    return Verdict(APPLIED if applied else WAITING)
