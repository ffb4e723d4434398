"""Where lab.engine_windows puts the processes beside the engine: the load generator, a
front and the engine's own helpers, off (or onto) the cores the engine's OpenMP threads are
bound to one each (gpu_agent.cores reads and moves them)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from gpu_agent import cores


def engine_bound(engine_url: str) -> set[int]:
    """The cores the threads of the local engine serving `engine_url` are bound to, one each."""
    pid = cores.local_listener(engine_url)
    return cores.bound_cores(pid) if pid is not None else set()


def listener(url: str) -> int:
    """The local process serving `url`; RuntimeError where none of ours does."""
    pid = cores.local_listener(url)
    if pid is None:
        raise RuntimeError(f"{url}: no local process listens there")
    return pid


def fence_client(own: set[int], bound: set[int], join: bool = False) -> list[int]:
    """Pin this process (the load generator) to its cores `own` less the engine's `bound`
    ones, or with `join` onto those of them it may run on; the cores it is left on (where the
    engine binds none, all of its own)."""
    left = (own & bound or own) if join else cores.keep_off(own, bound)
    cores.pin_this_process(left)
    return sorted(left)


def fence_engine_helpers(engine_url: str, own: set[int], bound: set[int]) -> dict[int, set[int]]:
    """Move the engine's threads that are not bound to one core (its API server, engine-core
    process, its workers' threads outside OpenMP) onto `own` less `bound`: those moved, with
    the cores they had (gpu_agent.cores.unfence gives them back). RuntimeError where the
    engine's threads hold every core."""
    if not own - bound:
        raise RuntimeError(f"{engine_url}: the engine's threads hold every core, none to fence to")
    return cores.fence_unbound(listener(engine_url), own - bound)


def set_policy(pid: int, policy: int, proc: Path = cores.PROC) -> dict[int, int]:
    """Put every thread of process `pid` in scheduling `policy` (os.SCHED_IDLE: it runs only
    where no normal thread wants the core, and its wake-ups preempt none; os.SCHED_OTHER:
    back to normal); threads it starts later inherit it. Each thread changed, with the
    policy it had (restore_policy gives it back)."""
    changed: dict[int, int] = {}
    for task in _tasks(proc, pid):
        with contextlib.suppress(ProcessLookupError):
            before = os.sched_getscheduler(int(task))
            if before != policy:
                os.sched_setscheduler(int(task), policy, os.sched_param(0))
                changed[int(task)] = before
    return changed


def restore_policy(changed: dict[int, int]) -> None:
    """Give each thread `set_policy` changed the policy it had (those gone are skipped)."""
    for tid, policy in changed.items():
        with contextlib.suppress(ProcessLookupError):
            os.sched_setscheduler(tid, policy, os.sched_param(0))


def _tasks(proc: Path, pid: int) -> list[str]:
    """The thread ids of process `pid` (none when it is gone)."""
    try:
        return os.listdir(proc / str(pid) / "task")
    except OSError:
        return []
