"""Which nodes a rollout goes to: the operator's selection resolved to nodes, less the targets
that are stale or never seen (by default; `stale_targets` says), and what each node is moved
to (Target). Pure reads; services.py stores the result."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from console.fleet.choices import NodeStatus
from console.fleet.models import Node
from console.tuning.models import LaunchProfileVersion, TierConfigVersion
from console.tuning.rollouts.choices import NodeSelection, StaleTargets


class RolloutError(ValueError):
    """A rule broken by otherwise well-formed input; `field` names what to fix."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Target:
    """One node's part: the versions to desire (None: leave that kind) and, for rollbacks,
    whether to end with no desired version of a kind."""

    node: Node
    tier_config: TierConfigVersion | None = None
    launch_profile: LaunchProfileVersion | None = None
    unset_tier_config: bool = False
    unset_launch_profile: bool = False


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


def stale_or_unseen(nodes: Iterable[Node], now: datetime | None = None) -> list[Node]:
    """Targets whose agent was never seen or has gone quiet (the fleet page's own status)."""
    now = now or timezone.now()
    return [n for n in nodes if n.status(now) in (NodeStatus.NEW, NodeStatus.STALE)]


def _describe(nodes: Iterable[Node]) -> str:
    return ", ".join(f"{n.name} ({NodeStatus(n.status()).label})" for n in nodes)


def apply_stale_rule(chosen: list[Node], rule: str) -> tuple[list[Node], list[Node]]:
    """(the nodes to roll out to, the ones left out)."""
    if rule not in StaleTargets.values:
        raise RolloutError("stale_targets", f"must be one of {', '.join(StaleTargets.values)}")
    stale = stale_or_unseen(chosen)
    if not stale or rule == StaleTargets.INCLUDE:
        return chosen, []
    if rule == StaleTargets.REFUSE:
        raise RolloutError(
            "stale_targets",
            f"stale or never seen: {_describe(stale)}; bring their agents up, or choose "
            "exclude (leave them out) or include",
        )
    ids = {n.pk for n in stale}
    kept = [n for n in chosen if n.pk not in ids]
    if not kept:
        raise RolloutError(
            "stale_targets", f"every target is stale or never seen: {_describe(stale)}"
        )
    return kept, stale
