"""The SLO guard's half of the executor: judging a watched wave, probing it when its own
traffic is too thin, and pausing to ask when even that cannot judge (docs/rollouts.md, "When
the wave is quiet"). The guard never passes a wave on too few requests.

A wave is judged on its traffic (heartbeats, guard.py) when there is enough of it on both
sides of the change. Otherwise, per the rollout's `guard_when_quiet`:
- "probe": the wave's nodes get probe load of their own (probe.py), compared with the same
  probe on nodes still on the old versions, run beside it; with none left (a single-node
  rollout, the last wave), with the same probe on the wave's own nodes just before their
  change, taken then for that reason (`probe_before`). A probe that cannot run or cannot judge
  pauses the rollout.
- "pause": the rollout pauses at once.
A paused rollout waits for an operator: resume (the wave goes on, counted unguarded) or abort.

A mixin of executor.Executor, which provides the clock, the lease (`renew`) and `fresh_s`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from console.audit.choices import Action
from console.audit.services import record
from console.fleet.models import Node, TelemetrySample
from console.tuning.rollouts import guard, probe
from console.tuning.rollouts.choices import (
    EventLevel,
    GuardWhenQuiet,
    NodeState,
    RolloutKind,
    RolloutState,
)
from console.tuning.rollouts.models import Rollout, RolloutNode, event
from console.tuning.rollouts.parts import facts_of
from console.tuning.rollouts.plan import is_healthy
from scheduler import ConfigError, default_config


class Watching:
    now: Callable[[], datetime]
    fresh_s: float

    def renew(self) -> bool:
        raise NotImplementedError

    # -- traffic ---------------------------------------------------------------------------

    def evaluate_guard(
        self, rollout: Rollout, parts: list[RolloutNode], now: datetime, window_s: float
    ) -> guard.GuardResult:
        """The wave's own traffic after the change against the same nodes' before it. A probe
        taken before the change ends the "before" window where it started: its requests are
        not the traffic being compared."""
        ids = [p.node_id for p in parts]
        window = timedelta(seconds=window_s)
        started = rollout.wave_started_at or rollout.guard_since or now
        probed_at = self._probe_before(rollout).get("started_at")
        if probed_at:
            started = min(started, datetime.fromisoformat(str(probed_at)))
        samples = TelemetrySample.objects.filter(node_id__in=ids)
        before = samples.filter(ts__gte=started - window, ts__lt=started).values_list(
            "tiers", flat=True
        )
        after = samples.filter(ts__gte=rollout.guard_since, ts__lte=now).values_list(
            "tiers", flat=True
        )
        return guard.evaluate(
            guard.summarise(before, rollout.guard_tier),
            guard.summarise(after, rollout.guard_tier),
            max_ttft_p99_regression_pct=rollout.guard_max_ttft_p99_regression_pct,
            max_error_rate=rollout.guard_max_error_rate,
            tier=rollout.guard_tier,
        )

    def judge_wave(
        self, rollout: Rollout, parts: list[RolloutNode], now: datetime, window_s: float
    ) -> guard.GuardResult | None:
        """The guard's verdict on the wave; None when a probe was stopped (an abort, or the
        lease lost: the next poll sees which)."""
        traffic = self.evaluate_guard(rollout, parts, now, window_s)
        if traffic.verdict != guard.UNJUDGED:
            return traffic
        if rollout.guard_when_quiet == GuardWhenQuiet.PAUSE:
            return guard.GuardResult(
                guard.UNJUDGED, f"{traffic.message}; this rollout pauses rather than probes"
            )
        probed = self.probe_wave(rollout, parts)
        if probed is None:
            return None
        thin = traffic.message.removeprefix("SLO guard could not judge: ")
        return guard.GuardResult(
            probed.verdict,
            f"{probed.message}; its own traffic was too thin: {thin}",
            probed.requests,
        )

    # -- probes ----------------------------------------------------------------------------

    def probe_wave(self, rollout: Rollout, parts: list[RolloutNode]) -> guard.GuardResult | None:
        """Probe the wave's nodes and judge them against a baseline probe."""
        after, missing = probe.pick(p.node for p in parts)
        if not after:
            return guard.GuardResult(
                guard.UNJUDGED,
                f"SLO guard could not judge: no probe possible: {'; '.join(missing)}",
            )
        sides = {"after": after}
        stored = guard.NO_FIGURES
        against = ""
        if rollout.guard_max_ttft_p99_regression_pct is not None:
            baseline, _ = probe.pick(self.baseline_nodes(rollout), len(after))
            before = self._probe_before(rollout)
            if baseline:
                sides["before"] = baseline
                names = ", ".join(t.node for t in baseline)
                against = f" against {names} (old versions, probed beside it)"
            elif "stats" in before:
                stored = guard.WindowStats.from_dict(before["stats"])
                nodes = ", ".join(before.get("nodes") or [])
                against = f" against the same probe on {nodes} before the change"
            else:
                why = before.get("error") or "none was taken"
                against = f", with no probe on the old versions to compare its TTFT with ({why})"
        outcome = probe.run(
            sides, self._mix(rollout, after), rollout.guard_probe_s, rollout.guard_tier, self.renew
        )
        if outcome.stopped:
            return None
        if outcome.error:
            return guard.GuardResult(
                guard.UNJUDGED, f"SLO guard could not judge: the probe failed: {outcome.error}"
            )
        result = guard.evaluate(
            outcome.stats.get("before", stored),
            outcome.stats["after"],
            max_ttft_p99_regression_pct=rollout.guard_max_ttft_p99_regression_pct,
            max_error_rate=rollout.guard_max_error_rate,
            tier=rollout.guard_tier,
            source="probe requests",
        )
        where = f"probe of {', '.join(t.node for t in after)} for {rollout.guard_probe_s:g} s"
        return guard.GuardResult(
            result.verdict, f"{result.message}; {where}{against}", result.requests
        )

    def baseline_nodes(self, rollout: Rollout) -> list[Node]:
        """Nodes of later waves, untouched and healthy: still on the old versions."""
        now = self.now()
        later = (
            RolloutNode.objects.filter(
                rollout=rollout, wave__gt=rollout.current_wave, state=NodeState.PENDING
            )
            .select_related("node")
            .order_by("position")
        )
        return [p.node for p in later if is_healthy(facts_of(p.node), now, self.fresh_s)]

    def probe_before_wave(self, rollout: Rollout, parts: list[RolloutNode]) -> bool:
        """Before a watched wave's change, when its TTFT could only be compared with a probe
        and no node would be left on the old versions to probe beside it: probe the wave's own
        nodes now and keep the figures. False when the probe was stopped."""
        wave = rollout.current_wave
        if not self._wants_probe_before(rollout, parts):
            return True
        now = self.now()
        healthy = [p.node for p in parts if is_healthy(facts_of(p.node), now, self.fresh_s)]
        targets, missing = probe.pick(healthy)
        data: dict[str, Any] = {"wave": wave, "started_at": now.isoformat()}
        taken: guard.WindowStats | None = None
        if not targets:
            data["error"] = "; ".join(missing) or "no node of the wave was healthy"
        else:
            outcome = probe.run(
                {"before": targets},
                self._mix(rollout, targets),
                rollout.guard_probe_s,
                rollout.guard_tier,
                self.renew,
            )
            if outcome.stopped:
                return False
            data["nodes"] = [t.node for t in targets]
            if outcome.error:
                data["error"] = f"the probe failed: {outcome.error}"
            else:
                taken = outcome.stats["before"]
                data["stats"] = taken.to_dict()
        Rollout.objects.filter(pk=rollout.pk, current_wave=wave).update(probe_before=data)
        rollout.probe_before = data
        if taken is not None:
            message = (
                f"wave {wave + 1}: probed before the change (no node left on the old versions "
                f"to compare with later): {', '.join(t.node for t in targets)}, "
                f"{taken.describe()}"
            )
            event(rollout, message, now=self.now())
        else:
            event(
                rollout,
                f"wave {wave + 1}: no probe before the change: {data['error']}",
                level=EventLevel.WARNING,
                now=self.now(),
            )
        return True

    def _wants_probe_before(self, rollout: Rollout, parts: list[RolloutNode]) -> bool:
        wave = rollout.current_wave
        return (
            rollout.kind == RolloutKind.ROLLOUT
            and rollout.guard_max_ttft_p99_regression_pct is not None
            and rollout.guard_when_quiet == GuardWhenQuiet.PROBE
            and rollout.observation_s(wave) > 0
            and all(p.state == NodeState.PENDING for p in parts)
            and self._probe_before(rollout).get("wave") != wave
            and not self.baseline_nodes(rollout)
        )

    @staticmethod
    def _probe_before(rollout: Rollout) -> dict[str, Any]:
        """The stored probe before the change, if it is this wave's."""
        data = rollout.probe_before or {}
        return data if data.get("wave") == rollout.current_wave else {}

    @staticmethod
    def _mix(rollout: Rollout, targets: list[probe.Target]) -> dict[str, float]:
        """The tier config's tiers (the one rolled out; the seed's when the rollout carries
        none), as probe.tier_mix weighs them."""
        config = default_config()
        if rollout.tier_config is not None:
            with contextlib.suppress(ConfigError):  # an older schema: the seed's tiers
                config = rollout.tier_config.parsed()
        return probe.tier_mix(config.tiers_by_urgency(), targets, rollout.guard_tier)

    # -- pause -----------------------------------------------------------------------------

    def pause(self, rollout: Rollout, result: guard.GuardResult) -> None:
        """Stop and ask: the operator resumes (the wave goes on unguarded) or aborts."""
        now = self.now()
        wave = rollout.current_wave
        reason = (
            f"wave {wave + 1}: {result.message}. Resume to let the wave go on unguarded, or "
            "abort to roll it back"
        )
        if Rollout.objects.filter(
            pk=rollout.pk, state=RolloutState.RUNNING, current_wave=wave
        ).update(state=RolloutState.PAUSED, reason=reason):
            event(rollout, f"paused: {reason}", level=EventLevel.WARNING, now=now)
            record(
                action=Action.UPDATE,
                obj=rollout,
                message=f"paused: {reason}"[:500],
                before={"state": RolloutState.RUNNING},
                after={"state": RolloutState.PAUSED, "reason": reason},
            )
