"""Executing a rollout: the loop a Celery task runs until the rollout is finished.

Idempotent and resumable. A worker first claims the rollout with a conditional UPDATE on its
lease (owner + expiry) and renews it once half of it has run out; a second worker given the
same rollout finds it claimed and returns. Every step is written down before it takes effect:
- a node's desired versions are set in the same transaction that moves its row from pending
  to applying (a conditional UPDATE) and stores the versions it had before, so a worker that
  dies at any point has either done both or neither, and the next one never sets them twice;
- waves, the guard's window and a rollback's start are columns of the rollout.
A restarted worker (or the periodic `resume_rollouts` task, once the lease has expired) picks
the rollout up from those rows and carries on, or finalises it.

Each poll reads the current wave's nodes (one query) and compares what their heartbeats
reported with the targets (plan.progress). On any failure, timeout, SLO regression or abort
the rollout turns to rolling_back: every node it touched is set back to exactly its state
before (plan.restore: the version it desired, or no desired version after going back to the
version it ran), and the rollout ends once they report it applied and healthy.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import OperationalError, transaction
from django.db.models import F, Q
from django.utils import timezone

from console.audit.choices import Action
from console.audit.services import record
from console.fleet.desired import clear_desired
from console.fleet.heartbeat import heartbeat_interval_s
from console.fleet.models import Node
from console.fleet.services import set_desired
from console.tuning.rollouts.choices import (
    ACTIVE_STATES,
    FINAL_STATES,
    EventLevel,
    NodeState,
    RolloutKind,
    RolloutState,
)
from console.tuning.rollouts.models import Rollout, RolloutNode, event
from console.tuning.rollouts.parts import (
    KINDS,
    changed_kinds,
    facts_of,
    targets_of,
    version_obj,
)
from console.tuning.rollouts.plan import (
    APPLIED,
    FAILED,
    HEALTHY,
    is_healthy,
    progress,
)
from console.tuning.rollouts.reverting import Reverting
from console.tuning.rollouts.watching import Watching

log = logging.getLogger(__name__)

POLL_S = 0.2


def lease_s() -> float:
    return float(getattr(settings, "TIERGATE_ROLLOUT_LEASE_S", 15))


def fresh_s() -> float:
    """How recent a heartbeat must be for a node to count as reporting (agents beat every
    1-2 s; a few missed beats are tolerated)."""
    return max(2.0, 4 * heartbeat_interval_s())


def new_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:{uuid.uuid4().hex[:8]}"


class Executor(Watching, Reverting):
    def __init__(
        self,
        rollout_id: int,
        *,
        owner: str | None = None,
        now: Callable[[], datetime] = timezone.now,
        sleep: Callable[[float], None] = time.sleep,
        poll_s: float = POLL_S,
    ) -> None:
        self.rollout_id = rollout_id
        self.owner = owner or new_owner()
        self.now = now
        self.sleep = sleep
        self.poll_s = poll_s
        self.fresh_s = fresh_s()

    # -- lease -----------------------------------------------------------------------------

    def claim(self) -> bool:
        now = self.now()
        free = Q(lease_until__isnull=True) | Q(lease_until__lt=now) | Q(lease_owner=self.owner)
        claimed = Rollout.objects.filter(free, pk=self.rollout_id, state__in=ACTIVE_STATES).update(
            lease_owner=self.owner, lease_until=now + timedelta(seconds=lease_s())
        )
        return claimed == 1

    def _holds(self, rollout: Rollout) -> bool:
        """Ours with more than half the lease left: no write needed this poll (a write per
        poll would add to SQLite's lock contention for nothing)."""
        left = lease_s() / 2
        return (
            rollout.lease_owner == self.owner
            and rollout.lease_until is not None
            and rollout.lease_until - self.now() > timedelta(seconds=left)
        )

    def renew(self) -> bool:
        """Keep the lease while a probe runs (called every half second or so); False when
        it was lost, or an operator asked to abort: the probe then stops."""
        held = Rollout.objects.filter(
            pk=self.rollout_id, lease_owner=self.owner, state__in=ACTIVE_STATES
        ).update(lease_until=self.now() + timedelta(seconds=lease_s()))
        return (
            bool(held)
            and not Rollout.objects.filter(pk=self.rollout_id, abort_requested=True).exists()
        )

    def release(self) -> None:
        Rollout.objects.filter(pk=self.rollout_id, lease_owner=self.owner).update(lease_until=None)

    # -- loop ------------------------------------------------------------------------------

    def run(self) -> str:
        """Drive the rollout to its end; returns its final state, or "" if another worker
        holds it (or took it over)."""
        if not self.claim():
            return ""
        try:
            while True:
                rollout = Rollout.objects.get(pk=self.rollout_id)
                if rollout.state in FINAL_STATES:
                    return rollout.state
                if rollout.state == RolloutState.PAUSED and not rollout.abort_requested:
                    return rollout.state  # the operator's turn: resume or abort enqueue it again
                if not self._holds(rollout) and not self.claim():
                    log.warning("%s: lease lost to another worker", rollout)
                    return ""
                try:
                    self.step(rollout)
                except OperationalError as exc:  # e.g. SQLite busy under load: try again next poll
                    log.warning("%s: database busy, retrying: %s", rollout, exc)
                except Exception as exc:
                    # A bug must not leave the rollout "running" to be resumed into the same bug
                    # forever: end it, saying so, so an operator can roll back what it changed.
                    log.exception("%s: executor error", rollout)
                    self.finish(
                        rollout,
                        RolloutState.FAILED,
                        f"internal error: {exc!r}; nodes may be left on the new versions",
                        self.now(),
                    )
                if Rollout.objects.filter(pk=self.rollout_id, state__in=FINAL_STATES).exists():
                    continue
                self.sleep(self.poll_s)
        finally:
            self.release()

    def step(self, rollout: Rollout) -> None:
        now = self.now()
        if rollout.state == RolloutState.PENDING:
            if Rollout.objects.filter(pk=rollout.pk, state=RolloutState.PENDING).update(
                state=RolloutState.RUNNING, started_at=now
            ):
                event(rollout, "started", now=now)
            rollout.state = RolloutState.RUNNING
        if rollout.state == RolloutState.ROLLING_BACK:
            self.revert_step(rollout, now)
            return
        if rollout.abort_requested:
            self.begin_revert(rollout, RolloutState.ABORTED, "aborted by an operator", now)
            return
        parts = list(rollout.nodes.select_related("node").filter(wave=rollout.current_wave))
        if not parts:
            total = rollout.nodes.count()
            covered = f"; {rollout.guard_coverage}" if rollout.guard_coverage else ""
            self.finish(
                rollout,
                RolloutState.SUCCEEDED,
                f"all {total} node(s) applied and healthy{covered}",
                now,
            )
            return
        pending = [p for p in parts if p.state == NodeState.PENDING]
        if pending:
            if not self.probe_before_wave(rollout, parts):
                return  # a probe stopped by an abort or a lost lease: the next poll sees which
            now = self.now()
            self.apply_wave(rollout, pending, now)
            parts = list(rollout.nodes.select_related("node").filter(wave=rollout.current_wave))
            rollout.refresh_from_db()
        failed = self.watch(rollout, parts, now)
        if failed is not None:
            outcome = (
                RolloutState.FAILED
                if rollout.kind == RolloutKind.ROLLBACK
                else RolloutState.ROLLED_BACK
            )
            self.begin_revert(rollout, outcome, f"node {failed.node.name}: {failed.error}", now)
            return
        if all(p.state == NodeState.HEALTHY for p in parts):
            self.wave_healthy(rollout, parts, now)

    # -- forward ---------------------------------------------------------------------------

    def apply_wave(self, rollout: Rollout, pending: list[RolloutNode], now: datetime) -> None:
        """Set the wave's desired versions: each node claimed pending -> applying in the same
        transaction as its change, with the versions it had before."""
        with transaction.atomic():
            if rollout.wave_started_at is None:
                Rollout.objects.filter(pk=rollout.pk, wave_started_at=None).update(
                    wave_started_at=now
                )
            groups: dict[tuple[int | None, int | None], list[Node]] = defaultdict(list)
            unsets: dict[str, list[Node]] = defaultdict(list)
            nodes = Node.objects.in_bulk([p.node_id for p in pending])
            for part in pending:
                node = nodes[part.node_id]
                kinds = changed_kinds(part)
                before: dict[str, int | None] = {}
                for kind in KINDS:
                    changed = kind in kinds
                    before[f"prev_{kind}_id"] = (
                        getattr(node, f"desired_{kind}_id") if changed else None
                    )
                    before[f"prev_applied_{kind}_id"] = (
                        getattr(node, f"applied_{kind}_id") if changed else None
                    )
                claimed = RolloutNode.objects.filter(pk=part.pk, state=NodeState.PENDING).update(
                    state=NodeState.APPLYING, applying_at=now, **before
                )
                if claimed:
                    groups[(part.target_tier_config_id, part.target_launch_profile_id)].append(node)
                    for kind in kinds:  # no version to go through first: unset at once
                        if getattr(part, f"unset_{kind}") and not getattr(
                            part, f"target_{kind}_id"
                        ):
                            unsets[kind].append(node)
            for kind, group in unsets.items():
                clear_desired(group, [kind], user=rollout.created_by, reason=str(rollout))
            for (tier_id, profile_id), group in groups.items():
                if tier_id is None and profile_id is None:
                    continue
                tier = version_obj("TierConfigVersion", tier_id)
                profile = version_obj("LaunchProfileVersion", profile_id)
                set_desired(
                    group,
                    tier_config=tier,
                    launch_profile=profile,
                    user=rollout.created_by,
                    reason=str(rollout),
                )
            count = sum(len(g) for g in groups.values())
            if count:
                event(
                    rollout,
                    f"wave {rollout.current_wave + 1}: desired versions set on {count} node(s): "
                    + ", ".join(n.name for g in groups.values() for n in g),
                    now=now,
                )

    def watch(
        self, rollout: Rollout, parts: list[RolloutNode], now: datetime
    ) -> RolloutNode | None:
        """Move the wave's nodes along; the first node found failed, if any."""
        failed: RolloutNode | None = None
        for part in parts:
            if part.state == NodeState.FAILED:
                failed = failed or part
                continue
            if part.state not in (NodeState.APPLYING, NodeState.APPLIED):
                continue
            verdict = progress(
                facts_of(part.node),
                targets_of(part),
                now=now,
                since=part.applying_at or now,
                timeout_s=rollout.convergence_timeout_s,
                fresh_s=self.fresh_s,
            )
            if verdict.state == FAILED:
                if self._move(part, NodeState.FAILED, error=verdict.error):
                    event(
                        rollout,
                        f"{part.node.name} failed: {verdict.error}",
                        level=EventLevel.ERROR,
                        node=part.node,
                        now=now,
                    )
                failed = failed or part
            elif verdict.state == HEALTHY:
                with transaction.atomic():
                    moved = self._move(
                        part, NodeState.HEALTHY, applied_at=part.applied_at or now, healthy_at=now
                    )
                    later = [
                        k
                        for k in KINDS
                        if getattr(part, f"unset_{k}") and getattr(part, f"target_{k}_id")
                    ]
                    if moved and later:  # back on what it ran before: now it desires nothing
                        clear_desired([part.node], later, rollout.created_by, str(rollout))
                if moved:
                    event(rollout, f"{part.node.name} applied and healthy", node=part.node, now=now)
            elif verdict.state == APPLIED and part.state == NodeState.APPLYING:
                self._move(part, NodeState.APPLIED, applied_at=now)
        return failed

    def _move(self, part: RolloutNode, state: str, **fields: Any) -> bool:
        moved = RolloutNode.objects.filter(pk=part.pk, state=part.state).update(
            state=state, **fields
        )
        if moved:
            part.state = state
            for name, value in fields.items():
                setattr(part, name, value)
        return bool(moved)

    def wave_healthy(self, rollout: Rollout, parts: list[RolloutNode], now: datetime) -> None:
        """The wave is applied and healthy: watch it for its observation window (the canary's
        soak, or a later wave's guard window), then judge the SLO guard and move on."""
        wave = rollout.current_wave
        window_s = rollout.observation_s(wave)
        judged = 0  # requests the guard's verdict on this wave rested on
        if window_s > 0:
            what = "the SLO guard" if rollout.has_guard else "its health"
            if rollout.guard_since is None:
                Rollout.objects.filter(pk=rollout.pk, guard_since=None).update(guard_since=now)
                # "Soaking" only where a soak was asked for; with none, the canary is watched
                # for the guard window alone, like any wave.
                soaking = rollout.is_canary_wave(wave) and bool(rollout.canary_soak_s)
                soak = "canary soaking" if soaking else "healthy"
                event(
                    rollout, f"wave {wave + 1} {soak}; watching {what} for {window_s:g} s", now=now
                )
                return
            sick = [
                p.node.name for p in parts if not is_healthy(facts_of(p.node), now, self.fresh_s)
            ]
            if sick:
                reason = f"wave {wave + 1}: {', '.join(sick)} unhealthy while being watched"
                event(rollout, reason, level=EventLevel.ERROR, now=now)
                self.begin_revert(rollout, RolloutState.ROLLED_BACK, reason, now)
                return
            if (now - rollout.guard_since).total_seconds() < window_s:
                return
            if rollout.has_guard:
                result = self.judge_wave(rollout, parts, now, window_s)
                if result is None:
                    return  # its probe was stopped (an abort, a lost lease): next poll
                now = self.now()
                if result.failed:
                    Rollout.objects.filter(pk=rollout.pk, state=RolloutState.RUNNING).update(
                        guarded_requests=F("guarded_requests") + result.requests
                    )
                    event(rollout, result.message, level=EventLevel.ERROR, now=now)
                    self.begin_revert(
                        rollout, RolloutState.ROLLED_BACK, f"wave {wave + 1}: {result.message}", now
                    )
                    return
                if not result.passed:
                    self.pause(rollout, result)
                    return
                judged = result.requests
                event(rollout, f"wave {wave + 1}: {result.message}", now=now)
            else:
                event(rollout, f"wave {wave + 1} stayed healthy for {window_s:g} s", now=now)
        else:
            event(rollout, f"wave {wave + 1} applied and healthy", now=now)
        Rollout.objects.filter(pk=rollout.pk, current_wave=wave).update(
            current_wave=wave + 1,
            wave_started_at=None,
            guard_since=None,
            guarded_requests=F("guarded_requests") + judged,
        )

    # -- end -------------------------------------------------------------------------------

    def finish(self, rollout: Rollout, state: str, reason: str, now: datetime) -> None:
        with transaction.atomic():
            done = Rollout.objects.filter(pk=rollout.pk, state__in=ACTIVE_STATES).update(
                state=state,
                reason=reason,
                finished_at=now,
                abort_requested=False,
            )
            if not done:
                return
            level = EventLevel.INFO if state == RolloutState.SUCCEEDED else EventLevel.WARNING
            label = RolloutState(state).label
            event(rollout, f"{label}: {reason}", level=level, now=now)
            record(
                action=Action.UPDATE,
                obj=rollout,
                message=f"{label}: {reason}"[:500],
                before={"state": rollout.state},
                after={"state": state, "reason": reason},
            )


def execute(rollout_id: int, **kwargs: Any) -> str:
    """Run a rollout to its end in this thread (what the Celery task does)."""
    return Executor(rollout_id, **kwargs).run()
