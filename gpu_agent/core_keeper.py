"""The agent's shell around gpu_agent.cores: every CHECK_S it reads which cores the engine's
threads are bound to (vLLM's CPU build binds its OpenMP threads one to a core) and keeps the
agent's own threads on the rest of its cores, where there is a rest (`--keep-off-engine-cores`,
on by default; docs/gateway.md, "Sharing cores with the engine"). An engine restarted on other
cores, or one that binds none, moves the agent back. The engine is the managed one's process
tree, or in attached mode the local process listening on the engine's port."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from typing import Any

from gpu_agent.cores import bound_cores, keep_off, local_listener, pin_this_process, span

log = logging.getLogger("gpu_agent.cores")

CHECK_S = 10.0
FIRST_CHECK_S = 2.0


class CoreKeeper:
    def __init__(
        self,
        engine_pid: Callable[[], int | None] | None,
        engine_url: Callable[[], str],
        enabled: bool = True,
    ) -> None:
        """`engine_pid`: the managed engine's (None in attached mode: found by its port)."""
        self.enabled = enabled
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
        self.bound = bound_cores(pid) if pid is not None else set()
        target = keep_off(self.own, self.bound)
        if target != self.cpus:
            pin_this_process(target)
            log.info(
                "engine threads bound to cores %s: the agent keeps to %s",
                span(self.bound) or "none",
                span(target),
            )
            self.cpus = target

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
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
