"""The backward half of the executor: turning a rollout to rolling_back, and setting every node
it touched back to exactly its state before (plan.restore), then waiting until each reports it
applied and healthy (or is not reporting, and takes it when it returns).

A mixin of executor.Executor, which provides the lease, the clock, `_move` and `finish`.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from django.db import transaction

from console.fleet.desired import clear_desired
from console.fleet.models import Node
from console.fleet.services import set_desired
from console.tuning.rollouts.choices import EventLevel, NodeState, RolloutKind, RolloutState
from console.tuning.rollouts.models import Rollout, RolloutNode, event
from console.tuning.rollouts.parts import facts_of, restores_of, version_obj
from console.tuning.rollouts.plan import (
    LAUNCH_PROFILE,
    TIER_CONFIG,
    is_applied,
    is_fresh,
    is_healthy,
)


class Reverting:
    fresh_s: float

    def _move(self, part: RolloutNode, state: str, **fields: Any) -> bool:
        raise NotImplementedError

    def finish(self, rollout: Rollout, state: str, reason: str, now: datetime) -> None:
        raise NotImplementedError

    def begin_revert(self, rollout: Rollout, outcome: str, reason: str, now: datetime) -> None:
        if rollout.kind == RolloutKind.ROLLBACK:
            # A rollback does not undo itself (that would re-apply what it is rolling back).
            self.finish(rollout, outcome, reason, now)
            return
        forward = (RolloutState.RUNNING, RolloutState.PAUSED)  # paused: an abort while it asks
        if Rollout.objects.filter(pk=rollout.pk, state__in=forward).update(
            state=RolloutState.ROLLING_BACK, outcome=outcome, reason=reason, revert_started_at=now
        ):
            event(rollout, f"rolling back: {reason}", level=EventLevel.WARNING, now=now)

    def revert_step(self, rollout: Rollout, now: datetime) -> None:
        parts = list(
            rollout.nodes.select_related("node")
            .exclude(applying_at=None)
            .exclude(state=NodeState.ROLLED_BACK)
        )
        to_set = [p for p in parts if p.reverted_at is None]
        if to_set:
            self.set_back(rollout, to_set, now)
        started = rollout.revert_started_at or now
        stuck: list[str] = []
        for part in parts:
            node = part.node
            restores = restores_of(part)
            # Still to unset once the node runs its old version again (see set_back).
            pending = [
                k for k, r in restores.items() if r.unset and getattr(node, f"desired_{k}_id")
            ]
            waits = {
                k: r.version
                for k, r in restores.items()
                if r.version is not None and getattr(node, f"desired_{k}_id") == r.version
            }
            facts = facts_of(node)
            if not is_fresh(facts, now, self.fresh_s):
                note = (
                    "its desired versions are as before the rollout; the agent is not "
                    "reporting and takes them when it returns"
                )
            elif is_applied(facts, waits) and is_healthy(facts, now, self.fresh_s):
                note = "back on its previous versions and healthy" if waits else "healthy"
            elif (now - started).total_seconds() > rollout.convergence_timeout_s:
                stuck.append(node.name)
                continue
            else:
                continue
            with transaction.atomic():
                if pending:
                    clear_desired([node], pending, rollout.created_by, f"rolling back {rollout}")
                if any(r.unset for r in restores.values()):
                    note += "; no desired version again, as before the rollout"
                moved = self._move(part, NodeState.ROLLED_BACK)
            if moved:
                event(rollout, f"{node.name} rolled back: {note}", node=node, now=now)
        if stuck:
            self.finish(
                rollout,
                RolloutState.FAILED,
                f"{rollout.reason}; the rollback did not converge within "
                f"{rollout.convergence_timeout_s:g} s on {', '.join(stuck)}",
                now,
            )
        elif all(p.state == NodeState.ROLLED_BACK for p in parts):
            self.finish(rollout, rollout.outcome or RolloutState.ROLLED_BACK, rollout.reason, now)

    def set_back(self, rollout: Rollout, parts: list[RolloutNode], now: datetime) -> None:
        """Desire again what each node desired before. A kind it desired nothing of is unset
        at once when there is no old version to return to first (or the agent is not
        reporting); otherwise the old version is desired, and unset once it runs again."""
        with transaction.atomic():
            groups: dict[tuple[int | None, int | None], list[Node]] = defaultdict(list)
            unsets: dict[str, list[Node]] = defaultdict(list)
            for part in parts:
                if not RolloutNode.objects.filter(pk=part.pk, reverted_at=None).update(
                    reverted_at=now
                ):
                    continue
                part.reverted_at = now
                fresh = is_fresh(facts_of(part.node), now, self.fresh_s)
                versions: dict[str, int | None] = {TIER_CONFIG: None, LAUNCH_PROFILE: None}
                for kind, r in restores_of(part).items():
                    if r.unset and (r.version is None or not fresh):
                        unsets[kind].append(part.node)
                    else:
                        versions[kind] = r.version
                groups[(versions[TIER_CONFIG], versions[LAUNCH_PROFILE])].append(part.node)
            for kind, group in unsets.items():
                clear_desired(group, [kind], rollout.created_by, f"rolling back {rollout}")
            for (tier_id, profile_id), group in groups.items():
                if tier_id is None and profile_id is None:
                    continue
                set_desired(
                    group,
                    tier_config=version_obj("TierConfigVersion", tier_id),
                    launch_profile=version_obj("LaunchProfileVersion", profile_id),
                    user=rollout.created_by,
                    reason=f"rolling back {rollout}",
                )
            count = len({n.pk for g in (*groups.values(), *unsets.values()) for n in g})
            if count:
                event(rollout, f"previous desired state set again on {count} node(s)", now=now)
