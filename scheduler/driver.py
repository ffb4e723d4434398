"""Thin asyncio shell around `Dispatcher` for the gateway.

No polling loop and no background task: every event that can change a decision (arrival, first
token, release, cancel, reconfigure) schedules one pump (a `Dispatcher.poll`) with
`loop.call_soon`, shared by all events of the same loop iteration, and one `loop.call_at` timer
is kept armed for the dispatcher's next wake-up (a tier's wait running out or a queue timeout).
An arrival that finds no pump pending polls at once instead: below saturation it is released
in the same loop iteration and `acquire` returns without yielding (the hot path's one tick
less, tests/agent/test_hop_ticks.py). Between events the driver costs nothing.

Cancellation safety: `acquire` is the only place a waiter can be cancelled while holding
dispatcher state. Whatever point the cancellation lands on (still queued, or released but the
ticket not yet handed over), the `except` path calls `Dispatcher.cancel`, which removes a queued
entry or frees a released request's slot, and is a no-op when neither applies. A release that
finds its waiter already cancelled frees the slot at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from types import TracebackType

from scheduler.config import TierConfig
from scheduler.dispatcher import Dispatcher
from scheduler.types import SHUTTING_DOWN, Rejection, Request, SchedulerStats

# asyncio may run a timer up to its clock resolution early; a little slack avoids a wake-up
# that finds nothing due yet and has to re-arm.
_TIMER_SLACK_S = 1e-4


class Rejected(Exception):
    """`acquire` refused the request: carries the dispatcher's `Rejection`."""

    def __init__(self, rejection: Rejection) -> None:
        super().__init__(f"{rejection.reason}: {rejection.detail}".rstrip(": "))
        self.rejection = rejection
        self.reason = rejection.reason
        self.status = rejection.status
        self.retry_after_s = rejection.retry_after_s


class Ticket:
    """A released request's slot. Call `first_token()` when the first token arrives and
    `release()` when the response ends (idempotent); `async with` releases on exit.
    `promoted`: released ahead of a more urgent tier by the starvation bound, so the engine
    should see it with the most urgent tier's priority. `sent_as`: the tier whose engine
    priority it carries when not its own (the most urgent one's when `promoted`, the next more
    urgent one's when its age bound promoted it), else None."""

    __slots__ = ("_driver", "_released", "promoted", "request", "sent_as")

    def __init__(
        self,
        driver: AsyncDispatcher,
        request: Request,
        promoted: bool = False,
        sent_as: str | None = None,
    ) -> None:
        self._driver = driver
        self.request = request
        self.promoted = promoted
        self.sent_as = sent_as
        self._released = False

    @property
    def released(self) -> bool:
        return self._released

    def first_token(self, *, timed: bool = True) -> None:
        """The first token arrived. `timed` False when it is only counted as started (a
        non-streamed answer): then it is no sample of the engine's first-token latency."""
        if not self._released:
            self._driver._first_token(self.request.id, timed)

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._driver._complete(self.request.id)

    async def __aenter__(self) -> Ticket:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


class AsyncDispatcher:
    """Submit requests and await their release; see the module docstring."""

    def __init__(self, dispatcher: Dispatcher, clock: Callable[[], float] = time.monotonic) -> None:
        self.dispatcher = dispatcher
        self._clock = clock
        self._waiters: dict[str, asyncio.Future[Ticket]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._pump_scheduled = False

    def start(self) -> None:
        """Bind to the running loop. `acquire` calls it on first use."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._closed = False

    async def aclose(self) -> None:
        """Stop the timer and refuse every queued waiter with reason "shutting_down" (503)."""
        self._closed = True
        self._cancel_timer()
        now = self._clock()
        for req_id, fut in list(self._waiters.items()):
            self.dispatcher.cancel(req_id, now)
            if not fut.done():
                fut.set_exception(Rejected(Rejection(SHUTTING_DOWN, 503, None, "gateway stopping")))
        self._waiters.clear()

    async def acquire(self, req: Request) -> Ticket:
        """Queue `req` and wait for its release; raise `Rejected` on a full queue or timeout."""
        if self._closed:
            raise Rejected(Rejection(SHUTTING_DOWN, 503, None, "gateway stopping"))
        self.start()
        assert self._loop is not None
        rejection = self.dispatcher.arrive(req, self._clock())
        if rejection is not None:
            raise Rejected(rejection)
        fut: asyncio.Future[Ticket] = self._loop.create_future()
        self._waiters[req.id] = fut
        try:
            if self._pump_scheduled:
                pass  # a burst: this arrival joins the iteration's one poll
            else:
                # Decide now: released on arrival, the awaited future is already done, so
                # the request goes upstream in this loop iteration, not the next.
                self._pump()
            return await fut
        except BaseException:
            # Cancelled (or anything else) before the ticket reached the caller: whether the
            # request is still queued or was just released, give its entry or slot back.
            self._waiters.pop(req.id, None)
            if self.dispatcher.cancel(req.id, self._clock()):
                self._schedule_pump()
            raise

    def reconfigure(self, config: TierConfig, *, default_max_in_flight: int | None = None) -> None:
        self.dispatcher.reconfigure(
            config, self._clock(), default_max_in_flight=default_max_in_flight
        )
        self._schedule_pump()

    def engine_policy(self, *, priority: bool) -> None:
        """The engine's scheduling policy as the agent learned it (`Dispatcher.engine_policy`).
        A change changes which awaiting requests count against a release: the next poll may
        release what waits."""
        before = self.dispatcher.engine_priority
        self.dispatcher.engine_policy(priority=priority)
        if self.dispatcher.engine_priority != before:
            self._schedule_pump()

    def stats(self) -> SchedulerStats:
        return self.dispatcher.stats(self._clock())

    def engine_waiting(self, count: int, *, running: int | None = None) -> None:
        """The engine's waiting-queue length from its /metrics (vLLM's num_requests_waiting):
        feeds the adaptive awaiting-first-token limit; with its running count, the recovery
        reserve's view of the engine's sequence limit."""
        self.dispatcher.engine_waiting(count, self._clock(), running=running)
        self._schedule_pump()

    @property
    def waiting(self) -> int:
        """Waiters not yet handed a ticket or a rejection."""
        return len(self._waiters)

    # -- internals ------------------------------------------------------------------------

    def _first_token(self, req_id: str, timed: bool) -> None:
        self.dispatcher.first_token(req_id, self._clock(), timed=timed)
        self._schedule_pump()

    def _complete(self, req_id: str) -> None:
        if self.dispatcher.complete(req_id, self._clock()):
            self._schedule_pump()

    def _schedule_pump(self) -> None:
        # Events of one loop iteration share one poll: under load a burst of arrivals and
        # completions costs one decision pass, and nothing waits longer than that iteration.
        if not self._pump_scheduled and self._loop is not None:
            self._pump_scheduled = True
            self._loop.call_soon(self._pump)

    def _pump(self) -> None:
        self._pump_scheduled = False
        if self._closed:
            return
        now = self._clock()
        result = self.dispatcher.poll(now)
        freed = False
        promoted = result.promoted
        sent_as = result.sent_as
        urgent = self.dispatcher.most_urgent
        for req in result.released:
            fut = self._waiters.pop(req.id, None)
            if fut is None or fut.done():
                # The waiter was cancelled an instant ago: hand the slot straight back.
                freed = self.dispatcher.cancel(req.id, now) or freed
            else:
                as_tier = sent_as.get(req.id) if sent_as else None
                up = as_tier == urgent and bool(promoted) and req.id in promoted
                fut.set_result(Ticket(self, req, up, as_tier))
        for req, rejection in result.rejected:
            fut = self._waiters.pop(req.id, None)
            if fut is not None and not fut.done():
                fut.set_exception(Rejected(rejection))
        if freed:
            self._pump()
            return
        self._arm(result.next_wakeup, now)

    def _arm(self, wakeup: float | None, now: float) -> None:
        if wakeup == self._timer_at and self._timer is not None:
            return
        self._cancel_timer()
        if wakeup is None or self._loop is None:
            return
        delay = max(0.0, wakeup - now) + _TIMER_SLACK_S
        self._timer_at = wakeup
        self._timer = self._loop.call_at(self._loop.time() + delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        self._pump()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_at = None
