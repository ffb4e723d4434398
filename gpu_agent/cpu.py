"""The agent's Linux scheduling policy (`--cpu-policy`, docs/gateway.md).

`batch` runs the agent under SCHED_BATCH: the kernel never lets its wakeups preempt a running
thread; it runs when a core frees or at the next scheduler tick, with its usual share. Where it
shares cores with vLLM's CPU build, whose OpenMP threads wait at every step for the slowest of
them, a gateway that preempts one thread for every relayed chunk stalls the whole step; under
SCHED_BATCH it takes its share in fewer, longer turns. The engine the agent starts is set back
to the normal policy (`reset_in_child`), so it never inherits the agent's."""

from __future__ import annotations

import os

CPU_POLICIES = {"normal": 0, "batch": 3}  # SCHED_OTHER, SCHED_BATCH (Linux's numbers)


def apply(policy: str) -> bool:
    """Put the calling thread (and every thread it starts later) under `policy`. False where
    the platform has no such call (nothing changed)."""
    if not hasattr(os, "sched_setscheduler"):
        return False
    os.sched_setscheduler(0, CPU_POLICIES[policy], os.sched_param(0))
    return True


def policy_of(pid: int = 0) -> str | None:
    """The policy name of a process's main thread (None: not one of ours, or no such call)."""
    if not hasattr(os, "sched_getscheduler"):
        return None
    number = os.sched_getscheduler(pid)
    return next((name for name, n in CPU_POLICIES.items() if n == number), None)


def reset_in_child() -> None:
    """In a child before exec: the normal policy, whatever the agent runs under."""
    if hasattr(os, "sched_getscheduler") and os.sched_getscheduler(0) != CPU_POLICIES["normal"]:
        apply("normal")
