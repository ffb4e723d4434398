"""Rollout workflows. Views, the API and the Celery task all call these; each writes its audit
event in the same transaction as its change.

    create_rollout(*, tier_config=None, launch_profile=None, selection="all", nodes=(), label="",
                   canary_count=1, wave_size=0, convergence_timeout_s=120.0,
                   guard_max_ttft_p99_regression_pct=None, guard_max_error_rate=None,
                   guard_window_s=30.0, guard_tier="online", message="", user=None,
                   request=None, start=True) -> Rollout
    rollback_rollout(rollout, user=None, request=None, start=True) -> Rollout
    rollback_version(version, user=None, request=None, start=True) -> Rollout
    abort_rollout(rollout, user=None, request=None) -> Rollout
    enqueue(rollout) -> None        (after the current transaction commits)

Every failure is a RolloutError naming the field to fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.http import HttpRequest
from django.utils import timezone

from console.audit.choices import Action
from console.audit.services import record
from console.fleet.choices import NodeMode
from console.fleet.models import Node
from console.tuning.engine_check import profile_refusals
from console.tuning.models import LaunchProfileVersion, TierConfigVersion
from console.tuning.rollouts.choices import (
    ACTIVE_STATES,
    NodeSelection,
    NodeState,
    RolloutKind,
    RolloutState,
)
from console.tuning.rollouts.models import Rollout, RolloutNode, event
from console.tuning.rollouts.plan import assign_waves

DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 86_400.0
MAX_WINDOW_S = 3_600.0


class RolloutError(ValueError):
    """A rule broken by otherwise well-formed input; `field` names what to fix."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _user(user: Any) -> Any:
    return user if user is not None and getattr(user, "is_authenticated", False) else None


def resolve_nodes(selection: str, nodes: Iterable[Node | int] = (), label: str = "") -> list[Node]:
    """The nodes a selection names, in a stable order (by name)."""
    if selection == NodeSelection.ALL:
        found = list(Node.objects.order_by("name"))
    elif selection == NodeSelection.NODES:
        ids = [n.pk if isinstance(n, Node) else int(n) for n in nodes]
        if not ids:
            raise RolloutError("nodes", "choose at least one node")
        found = list(Node.objects.filter(pk__in=ids).order_by("name"))
        missing = sorted(set(ids) - {n.pk for n in found})
        if missing:
            raise RolloutError("nodes", f"no such node: {', '.join(map(str, missing))}")
    elif selection == NodeSelection.LABEL:
        if not label:
            raise RolloutError("label", "give the label that selects the nodes")
        # Labels are a JSON list; filtering in Python keeps SQLite and PostgreSQL alike.
        found = [n for n in Node.objects.order_by("name") if label in (n.labels or [])]
        if not found:
            raise RolloutError("label", f"no node has the label {label!r}")
    else:
        raise RolloutError("node_selection", f"must be one of {', '.join(NodeSelection.values)}")
    if not found:
        raise RolloutError("nodes", "no node to roll out to: add nodes first")
    return found


def _check_free(nodes: Sequence[Node]) -> None:
    """A node takes part in one unfinished rollout at a time: two would fight over it.

    Called inside the transaction that stores the rollout: the nodes' rows stay locked until it
    commits, so two concurrent creates on PostgreSQL cannot both find them free."""
    list(
        Node.objects.select_for_update()
        .filter(pk__in=[n.pk for n in nodes])
        .values_list("pk", flat=True)
    )
    busy = (
        RolloutNode.objects.filter(node__in=nodes, rollout__state__in=ACTIVE_STATES)
        .select_related("node", "rollout")
        .first()
    )
    if busy is not None:
        raise RolloutError(
            "nodes", f"node {busy.node.name} is in unfinished {busy.rollout}; wait or abort it"
        )


def _check_strategy(
    canary_count: int,
    wave_size: int,
    timeout_s: float,
    pct: float | None,
    error_rate: float | None,
    window_s: float,
) -> None:
    if canary_count < 0:
        raise RolloutError("canary_count", "must be 0 or more")
    if wave_size < 0:
        raise RolloutError("wave_size", "must be 0 (all the rest at once) or more")
    if not 1.0 <= timeout_s <= MAX_TIMEOUT_S:
        raise RolloutError(
            "convergence_timeout_s", f"must be between 1 and {MAX_TIMEOUT_S:g} seconds"
        )
    if pct is not None and pct < 0:
        raise RolloutError("guard_max_ttft_p99_regression_pct", "must be 0 or more")
    if error_rate is not None and not 0.0 <= error_rate <= 1.0:
        raise RolloutError("guard_max_error_rate", "must be between 0 and 1")
    if not 1.0 <= window_s <= MAX_WINDOW_S:
        raise RolloutError("guard_window_s", f"must be between 1 and {MAX_WINDOW_S:g} seconds")


def _store(
    rollout: Rollout,
    parts: list[tuple[Node, TierConfigVersion | None, LaunchProfileVersion | None]],
    user: Any,
    request: HttpRequest | None,
    action: str,
) -> Rollout:
    waves = assign_waves(len(parts), rollout.canary_count, rollout.wave_size)
    rollout.created_by = _user(user)
    rollout.save()
    RolloutNode.objects.bulk_create(
        [
            RolloutNode(
                rollout=rollout,
                node=node,
                wave=wave,
                position=index,
                target_tier_config=tier,
                target_launch_profile=profile,
            )
            for index, ((node, tier, profile), wave) in enumerate(zip(parts, waves, strict=True))
        ]
    )
    count = max(waves) + 1 if waves else 0
    event(
        rollout,
        f"created by {getattr(rollout.created_by, 'username', 'system')}: {rollout.target_label} "
        f"to {len(parts)} node(s) in {count} wave(s)",
    )
    record(
        action=action,
        obj=rollout,
        after={**rollout.audit_dict(), "nodes": [n.pk for n, _, _ in parts]},
        user=user,
        request=request,
        message=rollout.message,
    )
    return rollout


def enqueue(rollout: Rollout) -> None:
    """Hand the rollout to a worker once the rows that describe it are committed."""
    from console.tuning.rollouts.tasks import run_rollout

    rollout_id = rollout.pk
    transaction.on_commit(lambda: run_rollout.delay(rollout_id))


def create_rollout(
    *,
    tier_config: TierConfigVersion | None = None,
    launch_profile: LaunchProfileVersion | None = None,
    selection: str = NodeSelection.ALL,
    nodes: Iterable[Node | int] = (),
    label: str = "",
    canary_count: int = 1,
    wave_size: int = 0,
    convergence_timeout_s: float = DEFAULT_TIMEOUT_S,
    guard_max_ttft_p99_regression_pct: float | None = None,
    guard_max_error_rate: float | None = None,
    guard_window_s: float = 30.0,
    guard_tier: str = "online",
    message: str = "",
    user: Any = None,
    request: HttpRequest | None = None,
    start: bool = True,
) -> Rollout:
    if tier_config is None and launch_profile is None:
        raise RolloutError(
            "tier_config", "choose a tier config version, a launch profile version, or both"
        )
    _check_strategy(
        canary_count,
        wave_size,
        convergence_timeout_s,
        guard_max_ttft_p99_regression_pct,
        guard_max_error_rate,
        guard_window_s,
    )
    if not guard_tier:
        raise RolloutError("guard_tier", "name the tier whose TTFT the guard watches")
    chosen = resolve_nodes(selection, nodes, label)
    if launch_profile is not None:
        attached = [n.name for n in chosen if n.mode == NodeMode.ATTACHED]
        if attached:
            raise RolloutError(
                "launch_profile",
                "launch profiles need managed mode; attached: " + ", ".join(attached),
            )
        refused = profile_refusals(launch_profile.args, chosen)  # the nodes' own engines
        if refused:
            raise RolloutError("launch_profile", "; ".join(refused))
    rollout = Rollout(
        kind=RolloutKind.ROLLOUT,
        tier_config=tier_config,
        launch_profile=launch_profile,
        message=message,
        node_selection=selection,
        label=label if selection == NodeSelection.LABEL else "",
        canary_count=canary_count,
        wave_size=wave_size,
        convergence_timeout_s=convergence_timeout_s,
        guard_max_ttft_p99_regression_pct=guard_max_ttft_p99_regression_pct,
        guard_max_error_rate=guard_max_error_rate,
        guard_window_s=guard_window_s,
        guard_tier=guard_tier,
    )
    with transaction.atomic():
        _check_free(chosen)
        _store(
            rollout,
            [(n, tier_config, launch_profile) for n in chosen],
            user,
            request,
            Action.ROLLOUT,
        )
        if start:
            enqueue(rollout)
    return rollout


def _rollback(
    parts: list[tuple[Node, TierConfigVersion | None, LaunchProfileVersion | None]],
    *,
    rollback_of: Rollout | None,
    tier_config: TierConfigVersion | None,
    launch_profile: LaunchProfileVersion | None,
    timeout_s: float,
    message: str,
    user: Any,
    request: HttpRequest | None,
    start: bool,
) -> Rollout:
    # One wave, no guard: a rollback should be quick and must not be held up by the very
    # regression it is undoing.
    rollout = Rollout(
        kind=RolloutKind.ROLLBACK,
        rollback_of=rollback_of,
        tier_config=tier_config,
        launch_profile=launch_profile,
        message=message,
        node_selection=NodeSelection.NODES,
        canary_count=0,
        wave_size=0,
        convergence_timeout_s=timeout_s,
    )
    with transaction.atomic():
        _check_free([n for n, _, _ in parts])
        _store(rollout, parts, user, request, Action.ROLLBACK)
        if start:
            enqueue(rollout)
    return rollout


def rollback_rollout(
    rollout: Rollout, user: Any = None, request: HttpRequest | None = None, start: bool = True
) -> Rollout:
    """A rollback rollout that sets every node this rollout changed back to what it had before."""
    if rollout.state in ACTIVE_STATES:
        raise RolloutError(
            "state", f"{rollout} is still {rollout.get_state_display()}: abort it instead"
        )
    if rollout.state in (RolloutState.ROLLED_BACK, RolloutState.ABORTED):
        raise RolloutError("state", f"{rollout} was already {rollout.get_state_display()}")
    if not rollout.can_roll_back:
        raise RolloutError(
            "kind", f"{rollout} is itself a rollback: to undo it, roll the versions out again"
        )
    parts = []
    for part in (
        rollout.nodes.select_related("node", "prev_tier_config", "prev_launch_profile")
        .exclude(applying_at=None)
        .exclude(state=NodeState.ROLLED_BACK)
    ):
        tier = part.prev_tier_config if part.target_tier_config_id is not None else None
        profile = part.prev_launch_profile if part.target_launch_profile_id is not None else None
        if tier is not None or profile is not None:
            parts.append((part.node, tier, profile))
    if not parts:
        raise RolloutError("state", f"{rollout} changed no node that had a version before it")
    tiers = {t.pk for _, t, _ in parts if t is not None}
    profiles = {p.pk for _, _, p in parts if p is not None}
    return _rollback(
        parts,
        rollback_of=rollout,
        tier_config=parts[0][1] if len(tiers) == 1 else None,
        launch_profile=parts[0][2] if len(profiles) == 1 else None,
        timeout_s=rollout.convergence_timeout_s,
        message=f"roll back {rollout}",
        user=user,
        request=request,
        start=start,
    )


def rollback_version(
    version: TierConfigVersion | LaunchProfileVersion,
    user: Any = None,
    request: HttpRequest | None = None,
    start: bool = True,
) -> Rollout:
    """Move the nodes that currently desire `version` to the version before it."""
    field = "tier_config" if isinstance(version, TierConfigVersion) else "launch_profile"
    previous = version.previous()
    if previous is None:
        raise RolloutError(
            field, f"{version.label} is the first version of {version.name}: nothing to go back to"
        )
    nodes = list(Node.objects.filter(**{f"desired_{field}": version}).order_by("name"))
    if not nodes:
        raise RolloutError("nodes", f"no node desires {version.label}")
    tier = previous if isinstance(previous, TierConfigVersion) else None
    profile = previous if isinstance(previous, LaunchProfileVersion) else None
    return _rollback(
        [(n, tier, profile) for n in nodes],
        rollback_of=None,
        tier_config=tier,
        launch_profile=profile,
        timeout_s=DEFAULT_TIMEOUT_S,
        message=f"roll back {version.label} to {previous.label}",
        user=user,
        request=request,
        start=start,
    )


def abort_rollout(
    rollout: Rollout, user: Any = None, request: HttpRequest | None = None
) -> Rollout:
    """Ask the executor to stop: it sets back what it touched and ends the rollout aborted.
    A rollout still pending that no worker holds has touched nothing: it ends at once."""
    now = timezone.now()
    with transaction.atomic():
        unheld = Q(lease_until__isnull=True) | Q(lease_until__lt=now)
        if Rollout.objects.filter(unheld, pk=rollout.pk, state=RolloutState.PENDING).update(
            state=RolloutState.ABORTED, reason="aborted before it started", finished_at=now
        ):
            rollout.refresh_from_db()
            who = getattr(_user(user), "username", "system")
            event(rollout, f"aborted by {who} before it started", level="warning")
            record(
                action=Action.ABORT,
                obj=rollout,
                user=user,
                request=request,
                message="aborted before it started",
            )
            return rollout
        changed = Rollout.objects.filter(
            pk=rollout.pk, state__in=ACTIVE_STATES, abort_requested=False
        ).update(abort_requested=True)
        if not changed:
            rollout.refresh_from_db()
            if rollout.abort_requested and rollout.is_active:
                return rollout  # asked twice: the first request stands
            raise RolloutError(
                "state", f"{rollout} is {rollout.get_state_display()}: nothing to abort"
            )
        rollout.abort_requested = True
        who = getattr(_user(user), "username", "system")
        event(rollout, f"abort requested by {who}", level="warning")
        record(
            action=Action.ABORT, obj=rollout, user=user, request=request, message="abort requested"
        )
    return rollout
