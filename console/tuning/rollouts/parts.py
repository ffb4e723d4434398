"""One rollout node's facts and targets, as the executor reads them: what its heartbeats said
(plan.NodeFacts), which kinds its part changes, and how each goes back (plan.restore)."""

from __future__ import annotations

from typing import Any

from console.fleet.models import Node
from console.tuning.rollouts.models import RolloutNode
from console.tuning.rollouts.plan import LAUNCH_PROFILE, TIER_CONFIG, NodeFacts, Restore, restore


def facts_of(node: Node) -> NodeFacts:
    return NodeFacts(
        applied={
            TIER_CONFIG: node.applied_tier_config_id,
            LAUNCH_PROFILE: node.applied_launch_profile_id,
        },
        apply_errors=node.apply_errors or {},
        health=node.health or {},
        last_seen_at=node.last_seen_at,
        acknowledged_errors=node.acknowledged_errors or {},
    )


KINDS = (TIER_CONFIG, LAUNCH_PROFILE)


def changed_kinds(part: RolloutNode) -> list[str]:
    """The kinds this part sets: a target version, or (rollbacks) no desired version."""
    return [k for k in KINDS if getattr(part, f"target_{k}_id") or getattr(part, f"unset_{k}")]


def restores_of(part: RolloutNode) -> dict[str, Restore]:
    """How each kind this part changed goes back to its state before (plan.restore)."""
    return {
        k: restore(getattr(part, f"prev_{k}_id"), getattr(part, f"prev_applied_{k}_id"))
        for k in changed_kinds(part)
    }


def targets_of(part: RolloutNode) -> dict[str, int | None]:
    return {TIER_CONFIG: part.target_tier_config_id, LAUNCH_PROFILE: part.target_launch_profile_id}


def version_obj(model_name: str, pk: int | None) -> Any:
    if pk is None:
        return None
    from console.tuning import models

    return getattr(models, model_name).objects.get(pk=pk)
