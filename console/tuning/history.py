"""What each node had before it came to want a version, read from the audit trail.

Every change of a node's desired versions is audited with its before and after (fleet's
`set_desired`, `clear_desired`, `update_node`), and every version an agent reports newly
applied too (the heartbeat). So "roll back this version" can send each node that wants it back
to what *that node* had before (docs/architecture.md#rollouts-and-rollbacks: "exactly its
state before"), not to the previous number of the name, which some nodes may never have run.

    before_targets(version) -> list[Before]  # the nodes wanting `version`, each with its way back
    rollback_plan(version) -> list[dict]     # the same, as the version page shows it
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from console.audit.models import AuditEvent
from console.fleet.models import Node
from console.tuning.models import TierConfigVersion, VersionedDocument
from console.tuning.rollouts.plan import restore

NODE_TYPE = "fleet.node"


@dataclass(frozen=True)
class Before:
    """One node's way back: desire `version` (None: no version to go to first), then, with
    `unset`, desire nothing of this kind, as before it wanted the version being rolled back.
    `known` is False where the audit trail holds no change into the version (the node was
    pointed at it before the trail began): the previous number stands in."""

    node: Node
    version: VersionedDocument | None
    unset: bool
    known: bool = True

    @property
    def label(self) -> str:
        if self.version is not None and self.unset:
            return f"{self.version.label}, then no desired version"
        if self.version is not None:
            return self.version.label
        return "no desired version"


def kind_of(version: VersionedDocument) -> str:
    return "tier_config" if isinstance(version, TierConfigVersion) else "launch_profile"


def _transition(
    events: list[AuditEvent], kind: str, version_id: int
) -> tuple[bool, int | None, int | None]:
    """(found, desired before, applied before) at the newest change into `version_id`, from one
    node's events, newest first."""
    desired_key, applied_key = f"desired_{kind}", f"applied_{kind}"
    for index, event in enumerate(events):
        before, after = event.before or {}, event.after or {}
        if not isinstance(before, dict) or not isinstance(after, dict):
            continue
        if after.get(desired_key) != version_id or desired_key not in before:
            continue
        if before[desired_key] == version_id:
            continue
        applied = None
        for older in events[index + 1 :]:
            report = older.after if isinstance(older.after, dict) else {}
            if applied_key in report:
                applied = report[applied_key]
                break
        return True, before[desired_key], applied
    return False, None, None


def before_targets(version: VersionedDocument) -> list[Before]:
    """The nodes that want `version` now, each with what it had before it wanted it."""
    kind = kind_of(version)
    model: type[VersionedDocument] = type(version)
    nodes = list(Node.objects.filter(**{f"desired_{kind}": version}).order_by("name"))
    if not nodes:
        return []
    history: dict[str, list[AuditEvent]] = {str(n.pk): [] for n in nodes}
    for event in AuditEvent.objects.filter(
        object_type=NODE_TYPE, object_id__in=list(history)
    ).order_by("-created_at", "-id"):
        history[event.object_id].append(event)
    previous = version.previous()
    out: list[Before] = []
    for node in nodes:
        found, desired, applied = _transition(history[str(node.pk)], kind, version.pk)
        if not found:
            if previous is not None:
                out.append(Before(node, previous, unset=False, known=False))
            continue
        back = restore(desired, applied)
        target = model.objects.filter(pk=back.version).first() if back.version else None
        if back.version is not None and target is None:
            continue  # the version it had is gone: nothing exact to go back to
        out.append(Before(node, target, unset=back.unset))
    return out


def rollback_plan(version: VersionedDocument) -> list[dict[str, Any]]:
    """For the version page: each node that wants `version` and where a rollback takes it."""
    return [{"node": b.node.name, "to": b.label, "known": b.known} for b in before_targets(version)]
