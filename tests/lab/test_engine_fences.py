"""lab.engine_fences' scheduling class: every thread of a real process put in SCHED_IDLE and
back (the idle-class window of lab.engine_windows)."""

from __future__ import annotations

import os
import subprocess
import sys

from lab.engine_fences import restore_policy, set_policy

_THREADS = """
import threading, time
for _ in range(2):
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
print(flush=True)
time.sleep(60)
"""


def _policies(pid: int) -> list[int]:
    return [os.sched_getscheduler(int(t)) for t in os.listdir(f"/proc/{pid}/task")]


def test_every_thread_goes_to_the_idle_class_and_back() -> None:
    """set_policy on a real process of three threads: each is put in SCHED_IDLE,
    and restore_policy gives each back SCHED_OTHER."""
    proc = subprocess.Popen([sys.executable, "-c", _THREADS], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # its threads have started
        assert _policies(proc.pid) == [os.SCHED_OTHER] * 3
        changed = set_policy(proc.pid, os.SCHED_IDLE)
        assert sorted(changed) == sorted(map(int, os.listdir(f"/proc/{proc.pid}/task")))
        assert set(changed.values()) == {os.SCHED_OTHER}
        assert _policies(proc.pid) == [os.SCHED_IDLE] * 3
        assert set_policy(proc.pid, os.SCHED_IDLE) == {}  # nothing left to change
        restore_policy(changed)
        assert _policies(proc.pid) == [os.SCHED_OTHER] * 3
        restore_policy({2**22 + 7: os.SCHED_OTHER})  # a thread that is gone is skipped
    finally:
        proc.kill()
        proc.communicate()
