"""Executing a sweep: the loop a Celery task runs, trial by trial, until the sweep ends.

Idempotent and resumable, as a rollout is (console/tuning/rollouts/executor.py): a worker
claims the sweep with a conditional UPDATE on its lease (owner + expiry) and renews it while it
works, a benchmark included (a helper thread renews it then); a second worker given the same
sweep finds it claimed and returns. Once a lease has expired (its worker died), the periodic
`resume_sweeps` task hands the sweep to another worker, which reads the rows and goes on.

Per trial (trials.py writes each step down before the next):
  plan (planner.next_trial over the stored trials) -> its version -> the node's desired
  version (tier config: hot-applied; launch profile: the agent's supervisor restarts the
  engine) -> wait until the heartbeats report it applied and the node healthy (a timeout or
  an apply error fails the trial, not the sweep) -> `repeats` benchmark runs as a RunSeries
  -> score -> progress and ETA.
A trial found running by a resumed worker is measured again from the start (the dead worker's
runs are marked failed). Cancel is read between steps, while waiting, and during a benchmark
(the running run is cancelled, as its cancel button would).

The end, whatever the reason (all trials done, cancel, failure): the node's desired version
of the swept kind goes back to the base, the executor waits until the node reports it applied
(and healthy), sets `restored`, chooses the best trial (best_of: only a trial whose decision
against the base is "better"), and only then writes the final status. The reason is written
first (status_reason, while still running), so a worker that dies while restoring leaves a
sweep the next one ends the same way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from console.audit.choices import Action
from console.audit.services import record
from console.bench import execution
from console.bench.repeats import request_cancel_series
from console.bench.sweeps import planner, trials
from console.bench.sweeps.choices import ACTIVE, FINISHED, SweepKind, SweepStatus, TrialStatus
from console.bench.sweeps.models import Sweep, SweepTrial
from console.fleet.models import Node
from console.fleet.services import set_desired
from console.tuning.rollouts.executor import fresh_s, new_owner
from console.tuning.rollouts.parts import facts_of
from console.tuning.rollouts.plan import FAILED, HEALTHY, is_fresh, progress

log = logging.getLogger(__name__)

POLL_S = 0.25
# A node silent this long while its version is awaited is not reporting (down, partitioned):
# the wait ends then rather than at the apply timeout.
NOT_REPORTING_S = 60.0
LOST_WORKER = "the sweep's worker was lost during this run; the trial is measured again"


def lease_s() -> float:
    return float(getattr(settings, "TIERGATE_SWEEP_LEASE_S", 15))


def apply_timeout_s() -> float:
    """How long a trial's version (or the base, at the end) may take to be applied and the
    node healthy: a hot tier config takes a beat or two, a real vLLM restart minutes."""
    return float(getattr(settings, "TIERGATE_SWEEP_APPLY_TIMEOUT_S", 600))


class LeaseLost(Exception):
    """Another worker holds the sweep now: this one stops at once, touching nothing."""


class Cancelled(Exception):
    """Cancel was requested while the executor waited."""


class Executor:
    def __init__(
        self,
        sweep_id: int,
        *,
        owner: str | None = None,
        now: Callable[[], datetime] = timezone.now,
        poll_s: float = POLL_S,
    ) -> None:
        self.sweep_id = sweep_id
        self.owner = owner or new_owner()
        self.now = now
        self.poll_s = poll_s
        self.outcome: str | None = None  # the final status once this worker decided it

    # -- lease -----------------------------------------------------------------------------

    def claim(self) -> bool:
        now = self.now()
        free = Q(lease_until__isnull=True) | Q(lease_until__lt=now) | Q(lease_owner=self.owner)
        return (
            Sweep.objects.filter(free, pk=self.sweep_id, status__in=ACTIVE).update(
                lease_owner=self.owner,
                lease_until=now + timedelta(seconds=lease_s()),
                heartbeat_at=now,
            )
            == 1
        )

    def renew(self) -> bool:
        """Extend our lease (and beat); False once another worker holds the sweep."""
        now = self.now()
        return (
            Sweep.objects.filter(pk=self.sweep_id, lease_owner=self.owner).update(
                lease_until=now + timedelta(seconds=lease_s()), heartbeat_at=now
            )
            == 1
        )

    def release(self) -> None:
        Sweep.objects.filter(pk=self.sweep_id, lease_owner=self.owner).update(lease_until=None)

    def _pause(self) -> None:
        time.sleep(self.poll_s)
        if not self.renew():
            raise LeaseLost

    # -- loop ------------------------------------------------------------------------------

    def run(self) -> str:
        """Drive the sweep to its end; its final status, or "" if another worker has it."""
        if not self.claim():
            return ""
        try:
            now = self.now()
            if Sweep.objects.filter(pk=self.sweep_id, status=SweepStatus.PENDING).update(
                status=SweepStatus.RUNNING, started_at=now
            ):
                log.info("sweep %s started", self.sweep_id)
            while True:
                sweep = Sweep.objects.select_related("node", "endpoint").get(pk=self.sweep_id)
                if sweep.status in FINISHED:
                    return str(sweep.status)
                if not self.renew():
                    log.warning("%s: lease lost to another worker", sweep)
                    return ""
                try:
                    self.step(sweep)
                except LeaseLost:
                    log.warning("%s: lease lost to another worker", sweep)
                    return ""
                except OperationalError as exc:  # e.g. SQLite busy under load: next step
                    log.warning("%s: database busy, retrying: %s", sweep, exc)
                    time.sleep(self.poll_s)
                except Exception as exc:
                    # A bug must not be resumed into forever: end the sweep, restoring the
                    # base; a bug while ending ends it at once, saying the node may be off it.
                    log.exception("%s: executor error", sweep)
                    if sweep.status_reason:
                        reason = f"{sweep.status_reason}; internal error while restoring: {exc!r}"
                        self.finish(sweep, SweepStatus.FAILED, reason, restored=False)
                    else:
                        self.decide(sweep, SweepStatus.FAILED, f"internal error: {exc!r}")
        finally:
            self.release()

    def step(self, sweep: Sweep) -> None:
        if sweep.status_reason or sweep.cancel_requested:
            self.end(sweep)
            return
        trial = (
            sweep.trials.filter(status__in=(TrialStatus.RUNNING, TrialStatus.PENDING))
            .order_by("index")
            .first()
        )
        if trial is None:
            done = [o for _, o in trials.outcomes(sweep)]
            values = planner.next_trial(sweep.spec(), done)
            if values is None:
                self.decide(sweep, SweepStatus.SUCCEEDED, f"{len(done)} trial(s) measured")
                return
            trial = trials.new_trial(sweep, values)
            if trial is None:  # another hand stored it first: read again
                return
        self.run_trial(sweep, trial)
        self.progress(sweep)

    def decide(self, sweep: Sweep, outcome: str, reason: str) -> None:
        """How the sweep will end; written before the node is restored."""
        self.outcome = outcome
        Sweep.objects.filter(pk=sweep.pk, status_reason="").update(status_reason=reason[:500])

    # -- one trial ---------------------------------------------------------------------------

    def run_trial(self, sweep: Sweep, trial: SweepTrial) -> None:
        now = self.now()
        if trial.status == TrialStatus.RUNNING:  # a lost worker's: measure it again
            trials.discard_series(trial, LOST_WORKER)
            SweepTrial.objects.filter(pk=trial.pk).update(
                series=None, started_at=now, apply_s=None, bench_s=None, error=""
            )
            trial.series = None
            log.info("%s: %s resumed from the start", sweep, trial)
        elif not SweepTrial.objects.filter(pk=trial.pk, status=TrialStatus.PENDING).update(
            status=TrialStatus.RUNNING, started_at=now
        ):
            return
        try:
            version = trials.version_of(sweep, trial)
            started = time.monotonic()
            error = self.apply(sweep, version)
            apply_s = time.monotonic() - started
            SweepTrial.objects.filter(pk=trial.pk).update(apply_s=apply_s)
            if error is not None:
                self.end_trial(trial, status=TrialStatus.FAILED, error=error)
                if not is_fresh(facts_of(self.node(sweep)), self.now(), fresh_s()):
                    self.decide(sweep, SweepStatus.FAILED, f"{sweep.node.name}: {error}")
                return
            started = time.monotonic()
            series = trials.new_series(sweep, trial)
            cancelled = self.benchmark(sweep, series)
            bench_s = time.monotonic() - started
            if cancelled:
                self.end_trial(trial, status=TrialStatus.CANCELLED, bench_s=bench_s)
                return
            self.end_trial(trial, bench_s=bench_s, **trials.score(sweep, series))
        except Cancelled:
            self.end_trial(trial, status=TrialStatus.CANCELLED)
        except (LeaseLost, OperationalError, SoftTimeLimitExceeded):
            raise  # the loop's: retry the step, stop, or end the sweep
        except Exception as exc:
            log.exception("%s: %s failed", sweep, trial)
            self.end_trial(trial, status=TrialStatus.FAILED, error=f"internal error: {exc!r}")

    def end_trial(self, trial: SweepTrial, **fields: Any) -> None:
        SweepTrial.objects.filter(pk=trial.pk, status=TrialStatus.RUNNING).update(
            finished_at=self.now(), **fields
        )

    def node(self, sweep: Sweep) -> Node:
        return Node.objects.get(pk=sweep.node_id)

    def apply(self, sweep: Sweep, version: Any, *, cancellable: bool = True) -> str | None:
        """Make the node desire `version` (of the swept kind) and wait until its heartbeats
        say it applied it and is healthy; None then, else why not (an apply error, a
        timeout). Raises Cancelled when cancel is requested meanwhile (if `cancellable`)."""
        kind = "tier_config" if sweep.kind == SweepKind.TIER_CONFIG else "launch_profile"
        with transaction.atomic():
            set_desired(
                [self.node(sweep)], user=sweep.created_by, reason=str(sweep), **{kind: version}
            )
        since = seen = self.now()
        timeout = apply_timeout_s()
        while True:
            now = self.now()
            facts = facts_of(self.node(sweep))
            verdict = progress(
                facts,
                {kind: version.pk},
                now=now,
                since=since,
                timeout_s=timeout,
                fresh_s=fresh_s(),
            )
            if verdict.state == HEALTHY:
                return None
            if verdict.state == FAILED:
                return f"{version}: {verdict.error}"
            if is_fresh(facts, now, fresh_s()):
                seen = now
            elif (now - seen).total_seconds() > NOT_REPORTING_S:
                # Agents beat on through an engine restart: this one is gone, not restarting.
                return f"{version}: the agent has not reported for over {NOT_REPORTING_S:g} s"
            if cancellable and Sweep.objects.filter(pk=sweep.pk, cancel_requested=True).exists():
                raise Cancelled
            self._pause()

    def benchmark(self, sweep: Sweep, series: Any) -> bool:
        """Run the series' runs in this thread while a helper renews the lease and turns a
        cancel of the sweep into a cancel of the running run; True if cancelled."""
        stop = threading.Event()
        state = {"cancelled": False, "lost": False}

        def watch() -> None:
            try:
                while not stop.wait(min(1.0, lease_s() / 3)):
                    if not self.renew():
                        state["lost"] = True
                        request_cancel_series(series)
                        return
                    if Sweep.objects.filter(pk=sweep.pk, cancel_requested=True).exists():
                        state["cancelled"] = True
                        request_cancel_series(series)
                        return
            finally:
                connection.close()

        watcher = threading.Thread(target=watch, name=f"sweep-{sweep.pk}-watch", daemon=True)
        watcher.start()
        try:
            execution.execute_series([series.pk])
        finally:
            stop.set()
            watcher.join(10)
        if state["lost"]:
            raise LeaseLost
        return (
            state["cancelled"] or Sweep.objects.filter(pk=sweep.pk, cancel_requested=True).exists()
        )

    def progress(self, sweep: Sweep) -> None:
        """trials_done, and the ETA: the mean wall time of the finished trials times the
        trials left (the planned count is an upper bound), plus the restore at the end (as
        long as a trial's apply: the same change, back)."""
        finished = list(
            sweep.trials.filter(
                status__in=trials.PLANNED_FROM, started_at__isnull=False, finished_at__isnull=False
            ).values_list("started_at", "finished_at", "is_base", "apply_s")
        )
        done = sweep.trials.filter(status__in=trials.PLANNED_FROM).count()
        # The query already left out open trials; the None test narrows the types to match.
        walls = [
            (end - start).total_seconds()
            for start, end, _, _ in finished
            if start is not None and end is not None
        ]
        applies = [a for _, _, base, a in finished if not base and a is not None]
        left = max(sweep.trials_planned - done, 0)
        eta = None
        if walls:
            eta = sum(walls) / len(walls) * left + (sum(applies) / len(applies) if applies else 0)
        Sweep.objects.filter(pk=sweep.pk, status__in=ACTIVE).update(trials_done=done, eta_s=eta)

    # -- end -------------------------------------------------------------------------------

    def final_status(self, sweep: Sweep) -> str:
        if self.outcome is not None:
            return self.outcome
        if sweep.cancel_requested:
            return SweepStatus.CANCELLED
        # Decided by a worker that died while restoring: failed if trials were left.
        done = [o for _, o in trials.outcomes(sweep)]
        left = planner.next_trial(sweep.spec(), done)
        return SweepStatus.SUCCEEDED if left is None else SweepStatus.FAILED

    def end(self, sweep: Sweep) -> None:
        if sweep.cancel_requested and not sweep.status_reason:
            self.decide(sweep, SweepStatus.CANCELLED, "cancelled by an operator")
            sweep.refresh_from_db()
        status = self.final_status(sweep)
        reason = sweep.status_reason
        sweep.trials.filter(status__in=(TrialStatus.RUNNING, TrialStatus.PENDING)).update(
            status=TrialStatus.CANCELLED, finished_at=self.now()
        )
        error = self.restore(sweep)
        if error is not None:
            status = SweepStatus.FAILED
            reason = f"{reason}; the node did not return to its base: {error}"
        self.finish(sweep, status, reason, restored=error is None)

    def restore(self, sweep: Sweep) -> str | None:
        """The node back on the base version of the swept kind; None once it reports it
        applied (and is healthy), else why not."""
        base = sweep.base_version
        node = self.node(sweep)
        kind = "tier_config" if sweep.kind == SweepKind.TIER_CONFIG else "launch_profile"
        if getattr(node, f"desired_{kind}_id") == base.pk == getattr(node, f"applied_{kind}_id"):
            return None  # never left it (or already back): nothing to wait for
        return self.apply(sweep, base, cancellable=False)

    def finish(self, sweep: Sweep, status: str, reason: str, *, restored: bool) -> None:
        outcomes = trials.outcomes(sweep)
        best_trial, result = trials.best_of(outcomes)
        reason = f"{reason}; {result}" if result and result not in reason else reason
        done = len(outcomes)
        with transaction.atomic():
            ended = Sweep.objects.filter(pk=sweep.pk, status__in=ACTIVE).update(
                status=status,
                status_reason=reason[:500],
                finished_at=self.now(),
                restored=restored,
                best_trial=best_trial,
                trials_done=done,
                eta_s=0.0,
            )
            if not ended:
                return
            label = SweepStatus(status).label
            record(
                action=Action.UPDATE,
                obj=sweep,
                message=f"{label}: {reason}"[:500],
                before={"status": sweep.status},
                after={
                    "status": status,
                    "restored": restored,
                    "best_trial": best_trial.index if best_trial else None,
                },
            )
        log.info("%s %s: %s", sweep, status, reason)


def execute(sweep_id: int, **kwargs: Any) -> str:
    """Run a sweep to its end in this thread (what the Celery task does)."""
    return Executor(sweep_id, **kwargs).run()
