"""What a rollout changes, node by node, for its page's "Changes applied".

Nodes of one rollout may come from different versions (one wanted v4, another v1) and, in a
rollback, go to different ones; each distinct move, from -> to, is its own table naming its
nodes, so no node's change is hidden behind another's. Before a node is touched its "from" is
what it wants now; once touched, what it wanted just before (the rollout keeps it).
"""

from __future__ import annotations

from typing import Any

from console.tuning.diffs import display_rows
from console.tuning.models import LaunchProfileVersion, TierConfigVersion
from console.tuning.rollouts.models import Rollout

KINDS = (
    ("tier_config", TierConfigVersion, "Tier config"),
    ("launch_profile", LaunchProfileVersion, "Launch profile"),
)


def applied_changes(rollout: Rollout) -> list[dict[str, Any]]:
    """One entry per kind and distinct (from, to): title, the nodes' names, `against` (the
    from version or None), `target` (None: no desired version), the diff rows, `same` (the
    nodes already wanted the target) and `unset` (they end with no desired version)."""
    parts = list(rollout.nodes.select_related("node").order_by("position"))
    out: list[dict[str, Any]] = []
    for kind, model, title in KINDS:
        groups: dict[tuple[int | None, int | None, bool], list[str]] = {}
        for part in parts:
            to_id = getattr(part, f"target_{kind}_id")
            unset = bool(getattr(part, f"unset_{kind}"))
            if to_id is None and not unset:
                continue  # this part leaves the kind alone
            from_id = (
                getattr(part, f"prev_{kind}_id")
                if part.touched
                else getattr(part.node, f"desired_{kind}_id")
            )
            groups.setdefault((from_id, to_id, unset), []).append(part.node.name)
        ids = {i for key in groups for i in key[:2] if i is not None}
        versions = {v.pk: v for v in model.objects.filter(pk__in=ids)}
        for (from_id, to_id, unset), names in groups.items():
            older = versions.get(from_id) if from_id is not None else None
            target = versions.get(to_id) if to_id is not None else None
            same = from_id == to_id and not unset
            rows = (
                display_rows(target.diff_from(older))  # type: ignore[arg-type]
                if target is not None and older is not None and not same
                else []
            )
            out.append(
                {
                    "title": title,
                    "nodes": names,
                    "against": older,
                    "target": target,
                    "rows": rows,
                    "same": same,
                    "unset": unset,
                    "detail_name": f"tuning:{kind.replace('_', '')}-detail",
                }
            )
    return out
