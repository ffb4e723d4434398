"""Rollout workflows. Views, the API and the Celery task all call these; each writes its audit
event in the same transaction as its change.

    create_rollout(*, tier_config=None, launch_profile=None, selection="all", nodes=(), label="",
                   stale_targets="exclude", canary_count=1, wave_size=0,
                   convergence_timeout_s=120.0, canary_soak_s=60.0,
                   guard_max_ttft_p99_regression_pct=50.0, guard_max_error_rate=0.05,
                   guard_window_s=30.0, guard_tier=None, guard_when_quiet="probe",
                   guard_probe_s=10.0, message="", user=None, request=None,
                   start=True) -> Rollout
    (which nodes, stale ones left out: targets.py)
    rollback_rollout(rollout, user=None, request=None, start=True) -> Rollout
    rollback_version(version, user=None, request=None, start=True) -> Rollout
    abort_rollout(rollout, user=None, request=None) -> Rollout
    resume_rollout(rollout, user=None, request=None) -> Rollout   (resume.py: a paused one)
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
from console.fleet.choices import NodeMode, NodeStatus
from console.fleet.models import Node
from console.fleet.services import HAND_CHANGE_CHECKS
from console.tuning.engine_check import profile_refusals
from console.tuning.models import LaunchProfileVersion, TierConfigVersion
from console.tuning.rollouts import guard, probe
from console.tuning.rollouts.choices import (
    ACTIVE_STATES,
    GuardWhenQuiet,
    NodeSelection,
    NodeState,
    RolloutKind,
    RolloutState,
    StaleTargets,
)
from console.tuning.rollouts.models import Rollout, RolloutNode, event
from console.tuning.rollouts.plan import assign_waves, restore
from console.tuning.rollouts.targets import (
    RolloutError,
    Target,
    apply_stale_rule,
    resolve_nodes,
)
from scheduler import ConfigError

DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 86_400.0
MAX_WINDOW_S = 3_600.0
# The defaults an operator gets unless they change them (docs/rollouts.md): the canary wave
# runs this long before the next wave starts, and the SLO guard compares its figures with the
# same nodes' figures before the change. None for a check turns it off.
DEFAULT_CANARY_SOAK_S = 60.0
DEFAULT_GUARD_WINDOW_S = 30.0
DEFAULT_GUARD_TTFT_P99_REGRESSION_PCT = 50.0
DEFAULT_GUARD_ERROR_RATE = 0.05
# A watched wave too quiet to judge is probed (watching.py) for this long, by default.
DEFAULT_GUARD_PROBE_S = 10.0


def _user(user: Any) -> Any:
    return user if user is not None and getattr(user, "is_authenticated", False) else None


def unfinished_rollout_of(node: Node) -> str | None:
    """Why the node's desired versions may not change by hand (fleet.desired asks this): a
    running rollout owns them, and would wait for (or restore) the wrong thing."""
    busy = RolloutNode.objects.filter(node=node, rollout__state__in=ACTIVE_STATES).first()
    if busy is None:
        return None
    return f"{node.name} is in unfinished rollout #{busy.rollout_id}: abort it first"


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
    for node in nodes:  # other owners of a node's desired versions (e.g. a running sweep)
        for check in HAND_CHANGE_CHECKS:
            reason = check(node)
            if reason is not None:
                raise RolloutError("nodes", reason)


def _check_strategy(
    canary_count: int,
    wave_size: int,
    timeout_s: float,
    pct: float | None,
    error_rate: float | None,
    window_s: float,
    soak_s: float = 0.0,
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
    if not 0.0 <= soak_s <= MAX_WINDOW_S:
        raise RolloutError("canary_soak_s", f"must be between 0 and {MAX_WINDOW_S:g} seconds")


def _store(
    rollout: Rollout,
    parts: list[Target],
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
                node=t.node,
                wave=wave,
                position=index,
                target_tier_config=t.tier_config,
                target_launch_profile=t.launch_profile,
                unset_tier_config=t.unset_tier_config,
                unset_launch_profile=t.unset_launch_profile,
            )
            for index, (t, wave) in enumerate(zip(parts, waves, strict=True))
        ]
    )
    count = max(waves) + 1 if waves else 0
    event(
        rollout,
        f"created by {getattr(rollout.created_by, 'username', 'system')}: {rollout.target_label} "
        f"to {len(parts)} node(s) in {count} wave(s)",
    )
    if rollout.excluded_nodes:
        event(
            rollout,
            "left out, stale or never seen: "
            + ", ".join(f"{n['name']} ({n['status']})" for n in rollout.excluded_nodes),
            level="warning",
        )
    record(
        action=action,
        obj=rollout,
        after={**rollout.audit_dict(), "nodes": [t.node.pk for t in parts]},
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


def guard_tier_of(tier_config: TierConfigVersion | None) -> str:
    """The guard's tier when the operator names none: the most urgent tier of the tier config
    rolled out; the seed's when the rollout carries none (or a version of an older schema)."""
    if tier_config is None:
        return guard.DEFAULT_TIER
    try:
        return guard.default_tier(tier_config.parsed())
    except ConfigError:
        return guard.DEFAULT_TIER


def create_rollout(
    *,
    tier_config: TierConfigVersion | None = None,
    launch_profile: LaunchProfileVersion | None = None,
    selection: str = NodeSelection.ALL,
    nodes: Iterable[Node | int] = (),
    label: str = "",
    stale_targets: str = StaleTargets.EXCLUDE,
    canary_count: int = 1,
    wave_size: int = 0,
    convergence_timeout_s: float = DEFAULT_TIMEOUT_S,
    canary_soak_s: float = DEFAULT_CANARY_SOAK_S,
    guard_max_ttft_p99_regression_pct: float | None = DEFAULT_GUARD_TTFT_P99_REGRESSION_PCT,
    guard_max_error_rate: float | None = DEFAULT_GUARD_ERROR_RATE,
    guard_window_s: float = DEFAULT_GUARD_WINDOW_S,
    guard_tier: str | None = None,  # None: the most urgent tier of the tier config
    guard_when_quiet: str = GuardWhenQuiet.PROBE,
    guard_probe_s: float = DEFAULT_GUARD_PROBE_S,
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
        canary_soak_s,
    )
    if guard_when_quiet not in GuardWhenQuiet.values:
        raise RolloutError("guard_when_quiet", f"must be one of {', '.join(GuardWhenQuiet.values)}")
    if not probe.MIN_PROBE_S <= guard_probe_s <= probe.MAX_PROBE_S:
        raise RolloutError(
            "guard_probe_s",
            f"must be between {probe.MIN_PROBE_S:g} and {probe.MAX_PROBE_S:g} seconds",
        )
    if guard_tier is None:
        guard_tier = guard_tier_of(tier_config)
    if not guard_tier:
        raise RolloutError("guard_tier", "name the tier whose TTFT the guard watches")
    chosen, excluded = apply_stale_rule(resolve_nodes(selection, nodes, label), stale_targets)
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
        stale_targets=stale_targets,
        excluded_nodes=[
            {"id": n.pk, "name": n.name, "status": NodeStatus(n.status()).label} for n in excluded
        ],
        canary_count=canary_count,
        wave_size=wave_size,
        convergence_timeout_s=convergence_timeout_s,
        canary_soak_s=canary_soak_s,
        guard_max_ttft_p99_regression_pct=guard_max_ttft_p99_regression_pct,
        guard_max_error_rate=guard_max_error_rate,
        guard_window_s=guard_window_s,
        guard_tier=guard_tier,
        guard_when_quiet=guard_when_quiet,
        guard_probe_s=guard_probe_s,
    )
    with transaction.atomic():
        _check_free(chosen)
        _store(
            rollout,
            [Target(n, tier_config, launch_profile) for n in chosen],
            user,
            request,
            Action.ROLLOUT,
        )
        if start:
            enqueue(rollout)
    return rollout


def _rollback(
    parts: list[Target],
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
        stale_targets=StaleTargets.INCLUDE,
        canary_count=0,
        wave_size=0,
        convergence_timeout_s=timeout_s,
        canary_soak_s=0.0,
        guard_max_ttft_p99_regression_pct=None,
        guard_max_error_rate=None,
    )
    with transaction.atomic():
        _check_free([t.node for t in parts])
        _store(rollout, parts, user, request, Action.ROLLBACK)
        if start:
            enqueue(rollout)
    return rollout


def _restore_target(part: RolloutNode) -> Target:
    """The part of a rollback that puts this node back exactly as it was before `part`'s
    rollout: each kind the rollout targeted goes back to its desired version, or to no desired
    version (after the version it ran, when the console knows one)."""
    fields: dict[str, Any] = {}
    for kind, model in (
        ("tier_config", TierConfigVersion),
        ("launch_profile", LaunchProfileVersion),
    ):
        if getattr(part, f"target_{kind}_id") is None:
            continue
        r = restore(getattr(part, f"prev_{kind}_id"), getattr(part, f"prev_applied_{kind}_id"))
        fields[kind] = model.objects.get(pk=r.version) if r.version is not None else None
        fields[f"unset_{kind}"] = r.unset
    return Target(part.node, **fields)


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
    parts = [
        _restore_target(part)
        for part in rollout.nodes.select_related("node")
        .exclude(applying_at=None)
        .exclude(state=NodeState.ROLLED_BACK)
    ]
    if not parts:
        raise RolloutError("state", f"{rollout} changed no node")
    tiers = {t.tier_config for t in parts}
    profiles = {t.launch_profile for t in parts}
    return _rollback(
        parts,
        rollback_of=rollout,
        tier_config=next(iter(tiers)) if len(tiers) == 1 else None,
        launch_profile=next(iter(profiles)) if len(profiles) == 1 else None,
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
    """Move each node that currently desires `version` back to what that node had before it
    (console/tuning/history.py: from the audit trail; the previous number where the trail
    holds nothing)."""
    from console.tuning.history import before_targets, kind_of

    field = kind_of(version)
    if not Node.objects.filter(**{f"desired_{field}": version}).exists():
        raise RolloutError("nodes", f"no node desires {version.label}")
    befores = before_targets(version)
    if not befores:
        raise RolloutError(
            field, f"no node that desires {version.label} had anything before it to go back to"
        )
    ways: list[dict[str, Any]] = [{field: b.version, f"unset_{field}": b.unset} for b in befores]
    parts = [Target(b.node, **way) for b, way in zip(befores, ways, strict=True)]
    goals = {b.label for b in befores}
    single = befores[0].version if len(goals) == 1 and not befores[0].unset else None
    tier = single if isinstance(single, TierConfigVersion) else None
    profile = single if isinstance(single, LaunchProfileVersion) else None
    where = single.label if single is not None else "what each node had before"
    return _rollback(
        parts,
        rollback_of=None,
        tier_config=tier,
        launch_profile=profile,
        timeout_s=DEFAULT_TIMEOUT_S,
        message=f"roll back {version.label} to {where}",
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
        if Rollout.objects.filter(pk=rollout.pk, state=RolloutState.PAUSED).exists():
            enqueue(rollout)  # no worker holds a paused rollout: one must roll it back
        who = getattr(_user(user), "username", "system")
        event(rollout, f"abort requested by {who}", level="warning")
        record(
            action=Action.ABORT, obj=rollout, user=user, request=request, message="abort requested"
        )
    return rollout
