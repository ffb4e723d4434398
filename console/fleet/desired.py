"""Desired-state workflows besides setting a version (services.set_desired): unsetting one,
and acknowledging an agent's apply error. Operators call them from the node page and the API,
rollbacks call clear_desired; each writes its audit event in the same transaction.

    clear_desired(nodes, kinds, user=None, reason="", request=None) -> list[Node]
    unset_desired(node, kind, user, request=None) -> Node
    acknowledge_apply_error(node, kind, user, request=None) -> Node

"No desired version" tells the agent to keep what it runs and to drop its apply error of
that kind (docs/protocol.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.http import HttpRequest

from console.audit.choices import Action
from console.audit.services import record
from console.fleet.models import Node
from console.fleet.services import HAND_CHANGE_CHECKS, FleetError, check_hand_change

DESIRED_KINDS = ("tier_config", "launch_profile")


def clear_desired(
    nodes: Iterable[Node],
    kinds: Iterable[str],
    user: Any = None,
    reason: str = "",
    request: HttpRequest | None = None,
) -> list[Node]:
    """Make these nodes desire nothing of these kinds: the agent keeps running what it has
    applied and drops its apply error of that kind (docs/protocol.md). One audit event per node
    changed, in one transaction. Returns the nodes changed."""
    wanted = [k for k in DESIRED_KINDS if k in set(kinds)]
    changed: list[Node] = []
    with transaction.atomic():
        for node in nodes:
            before = {f"desired_{k}": getattr(node, f"desired_{k}_id") for k in DESIRED_KINDS}
            fields = [f"desired_{k}" for k in wanted if getattr(node, f"desired_{k}_id")]
            if not fields:
                continue
            for name in fields:
                setattr(node, name, None)
            node.save(update_fields=fields)
            after = {f"desired_{k}": getattr(node, f"desired_{k}_id") for k in DESIRED_KINDS}
            message = "desired versions unset" + (f": {reason}" if reason else "")
            record(
                action=Action.UPDATE,
                obj=node,
                before=before,
                after=after,
                user=user,
                request=request,
                message=message,
            )
            changed.append(node)
    return changed


def _check_kind(kind: str, kinds: Iterable[str] = DESIRED_KINDS) -> None:
    if kind not in kinds:
        raise FleetError("kind", f"must be one of {', '.join(kinds)}")


# The checks a hand change asks (services.HAND_CHANGE_CHECKS, where update_node asks them too).
__all__ = ["HAND_CHANGE_CHECKS", "acknowledge_apply_error", "clear_desired", "unset_desired"]


def unset_desired(node: Node, kind: str, user: Any, request: HttpRequest | None = None) -> Node:
    """Stop desiring a version of `kind` on this node (audited)."""
    _check_kind(kind)
    if getattr(node, f"desired_{kind}_id") is None:
        raise FleetError("kind", f"{node.name} desires no {kind.replace('_', ' ')}")
    with transaction.atomic():
        check_hand_change(node)
        clear_desired([node], [kind], user=user, reason="by hand", request=request)
    return node


def acknowledge_apply_error(
    node: Node, kind: str, user: Any, request: HttpRequest | None = None
) -> Node:
    """Mark the node's current apply error of `kind` as seen: it no longer makes the node
    degraded. The acknowledgement lapses once the agent stops reporting that error, so the
    same failure after a retry shows again. Audited."""
    with transaction.atomic():
        node = Node.objects.select_for_update().get(pk=node.pk)
        errors = node.apply_errors or {}
        _check_kind(kind, sorted(errors) or DESIRED_KINDS)
        if kind not in errors:
            raise FleetError("kind", f"{node.name} reports no {kind} apply error")
        acknowledged = dict(node.acknowledged_errors or {})
        if acknowledged.get(kind) == errors[kind]:
            return node
        acknowledged[kind] = errors[kind]
        node.acknowledged_errors = acknowledged
        node.save(update_fields=["acknowledged_errors"])
        record(
            action=Action.UPDATE,
            obj=node,
            before={"apply_error": errors[kind]},
            after={"acknowledged": True},
            user=user,
            request=request,
            message=f"{kind} apply error acknowledged",
        )
    return node
