"""`python -m lab.burner DUTY`: a process that spins DUTY of one core and touches no traffic.

lab.engine_windows runs it beside an engine (its window (b)) to learn what a process that
only takes CPU costs the engine. It burns in short busy slices with sleeps between, so that it
wakes often, as a proxy does. It says `burning` on stdout once it spins: its starter counts its
CPU from there, not from the interpreter's start-up (which on a 3 s window was up to 0.4 of a
core). Its process is labelled "burner" by lab.cpu_by_process.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator

SLICE_S = 0.0003  # the busy slice


def burn(duty: float, slice_s: float = SLICE_S) -> None:
    """Spin `duty` of one core, in slices of `slice_s`, until killed; "burning" first."""
    rest = slice_s * (1 - duty) / duty
    print("burning", flush=True)
    while True:
        end = time.perf_counter() + slice_s
        while time.perf_counter() < end:
            pass
        time.sleep(rest)


@contextlib.contextmanager
def burner(duty: float) -> Iterator[int]:
    """A burner process, once it burns (its pid); killed on leaving."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "lab.burner", str(duty)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "burning":
            raise RuntimeError(f"the burner did not start (exit {proc.wait()})")
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        duty = float(argv[0])
    except (IndexError, ValueError):
        duty = 0.0
    if not 0 < duty < 1:
        print("usage: python -m lab.burner DUTY (a share of one core, in (0, 1))", file=sys.stderr)
        return 2
    burn(duty)
    return 0


if __name__ == "__main__":
    sys.exit(main())
