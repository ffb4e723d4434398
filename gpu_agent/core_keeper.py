"""The agent's shell around gpu_agent.cores: every CHECK_S it reads which cores the engine's
threads are bound to (vLLM's CPU build binds its OpenMP threads one to a core) and keeps the
agent's own threads on the rest of its cores, where there is a rest (`--keep-off-engine-cores`,
on by default; docs/gateway.md, "Sharing cores with the engine"). With `--fence-engine-helpers`
(on by default) it moves the engine's own threads that are not bound to a core there too,
beside the agent, and gives them back when it stops. An engine restarted on other cores, or
one that binds none, moves the agent back. The engine is the managed one's process tree, or in
attached mode the local process listening on the engine's port."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from typing import Any

from gpu_agent.cores import (
    bound_cores,
    fence_unbound,
    keep_off,
    local_listener,
    pin_this_process,
    span,
    unfence,
)

log = logging.getLogger("gpu_agent.cores")

# How often the engine's cores are read. TIERGATE_CORE_CHECK_S shortens it for the tests
# (tests/agent/test_core_keeper.py), which otherwise wait out a 10 s check to see a later one.
CHECK_S = float(os.environ.get("TIERGATE_CORE_CHECK_S", "10"))
FIRST_CHECK_S = min(2.0, CHECK_S)


class CoreKeeper:
    def __init__(
        self,
        engine_pid: Callable[[], int | None] | None,
        engine_url: Callable[[], str],
        enabled: bool = True,
        fence_helpers: bool = True,
    ) -> None:
        """`engine_pid`: the managed engine's (None in attached mode: found by its port).
        `fence_helpers`: also move the engine's threads that are not bound to one core (its
        API server, engine-core process, its workers' other threads) off the bound cores."""
        self.enabled = enabled
        self.fence_helpers = fence_helpers
        # The engine whose helpers were fenced and onto which cores; each thread moved, with
        # the cores it had (given back at close). On two cores a fenced helper is bound to one
        # core too, so the cores fenced onto never count as the engine's OpenMP cores.
        self._fence: tuple[int, frozenset[int]] | None = None
        self._fenced: dict[int, set[int]] = {}
        self._engine_pid = engine_pid
        self._engine_url = engine_url
        self.own = set(os.sched_getaffinity(0))
        self.cpus = set(self.own)
        self.bound: set[int] = set()
        self._attached_pid: int | None = None
        self._task: asyncio.Task[None] | None = None

    def report(self) -> dict[str, Any]:
        return {
            "keep_off_engine_cores": self.enabled,
            "engine_bound": sorted(self.bound),
            "agent_cpus": sorted(self.cpus),
            "fence_engine_helpers": self.enabled and self.fence_helpers,
            "engine_helpers_on": sorted(self._fence[1]) if self._fence else None,
        }

    def engine_pid(self) -> int | None:
        if self._engine_pid is not None:
            return self._engine_pid()
        if self._attached_pid is not None and os.path.exists(f"/proc/{self._attached_pid}"):
            return self._attached_pid
        self._attached_pid = local_listener(self._engine_url())
        return self._attached_pid

    def check(self) -> None:
        """Read the engine's bound cores and move the agent's threads if they changed."""
        pid = self.engine_pid()
        if self._fence is not None and self._fence[0] != pid:  # another engine, or none
            self._fence, self._fenced = None, {}
        self.bound = bound_cores(pid) if pid is not None else set()
        if self._fence is not None:
            self.bound -= self._fence[1]
        target = keep_off(self.own, self.bound)
        if target != self.cpus:
            pin_this_process(target)
            log.info(
                "engine threads bound to cores %s: the agent keeps to %s",
                span(self.bound) or "none",
                span(target),
            )
            self.cpus = target
        if self.fence_helpers and pid is not None and self.bound and target.isdisjoint(self.bound):
            self._fence_helpers(pid, target)

    def _fence_helpers(self, pid: int, target: set[int]) -> None:
        """The engine's threads not bound to one core onto `target`, beside the agent: vLLM's
        CPU build leaves its API server and engine-core process free to run on its OpenMP
        cores, and the kernel moves them there when the other cores are busy (with the agent
        on them, say), which costs the OpenMP threads their steps (lab/NOTES.md, "Cores, on
        CPU-only nodes")."""
        try:
            moved = fence_unbound(pid, target)
        except PermissionError as exc:  # another user's engine: leave it, and say so once
            log.warning("cannot move the engine's helper threads: %s", exc)
            self.fence_helpers = False
            return
        if moved and self._fence is None:
            log.info(
                "engine threads not bound to a core (%d: API server, engine-core process) "
                "moved onto %s, off the engine's cores %s",
                len(moved),
                span(target),
                span(self.bound),
            )
        self._fence = (pid, frozenset(target))
        self._fenced.update({tid: cpus for tid, cpus in moved.items() if tid not in self._fenced})

    def start(self) -> None:
        if self.enabled and len(self.own) > 1:
            self._task = asyncio.create_task(self._run(), name="core-keeper")

    async def _run(self) -> None:
        await asyncio.sleep(FIRST_CHECK_S)
        while True:
            try:
                await asyncio.to_thread(self.check)
            except (OSError, ValueError) as exc:  # an odd /proc: leave the agent where it is
                log.warning("reading the engine's cores: %s", exc)
            await asyncio.sleep(CHECK_S)

    async def aclose(self) -> None:
        """Stop checking, and give the engine's helpers back the cores they had."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._fence is not None and os.path.exists(f"/proc/{self._fence[0]}"):
            with contextlib.suppress(OSError):  # (an engine gone has no threads to give back)
                unfence(self._fenced)
        self._fence, self._fenced = None, {}
