"""Resuming a rollout the SLO guard paused because it could not judge a wave (watching.py).

    resume_rollout(rollout, user=None, request=None) -> Rollout

The operator's answer to "the guard could not judge": the wave goes on as it is, counted as
unguarded (the rollout's `unguarded_waves`, shown wherever "guarded by N requests" is), and the
next wave starts. The other answer is abort (services.abort_rollout), which rolls back. Both
are audited; a RolloutError names what is wrong.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F
from django.http import HttpRequest

from console.audit.choices import Action
from console.audit.services import record
from console.tuning.rollouts.choices import EventLevel, RolloutState
from console.tuning.rollouts.models import Rollout, event
from console.tuning.rollouts.services import enqueue
from console.tuning.rollouts.targets import RolloutError


def resume_rollout(
    rollout: Rollout, user: Any = None, request: HttpRequest | None = None
) -> Rollout:
    with transaction.atomic():
        wave = rollout.current_wave
        moved = Rollout.objects.filter(
            pk=rollout.pk, state=RolloutState.PAUSED, abort_requested=False, current_wave=wave
        ).update(
            state=RolloutState.RUNNING,
            reason="",
            current_wave=wave + 1,
            wave_started_at=None,
            guard_since=None,
            unguarded_waves=F("unguarded_waves") + 1,
        )
        if not moved:
            rollout.refresh_from_db()
            if rollout.abort_requested:
                raise RolloutError("state", f"{rollout}: an abort was asked for already")
            raise RolloutError(
                "state",
                f"{rollout} is {rollout.get_state_display()}, not paused: nothing to resume",
            )
        who = getattr(user, "username", "") if getattr(user, "is_authenticated", False) else ""
        message = (
            f"resumed by {who or 'system'}: wave {wave + 1} goes on without a guard verdict "
            "(unguarded)"
        )
        event(rollout, message, level=EventLevel.WARNING)
        record(
            action=Action.UPDATE,
            obj=rollout,
            user=user,
            request=request,
            message=message,
            before={"state": RolloutState.PAUSED, "current_wave": wave},
            after={"state": RolloutState.RUNNING, "current_wave": wave + 1},
        )
        enqueue(rollout)
    rollout.refresh_from_db()
    return rollout
