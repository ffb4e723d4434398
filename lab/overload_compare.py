"""Recovery after an overload, against a paired control run (issue 16, item 4).

    .venv/bin/python lab/bench_admission.py --json over.json overload --overload-s 60 ...
    .venv/bin/python lab/bench_admission.py --json control.json overload --overload-s 0 ...
    .venv/bin/python lab/overload_compare.py over.json control.json

Each phase of the overload bench draws its arrivals from its own seeded generator, so the
30 s after the overload of one run and the 30 s after the (empty) overload of a control run
with `--overload-s 0` carry the same requests at the same offsets. The control's online TTFT
in each second is what the same load gives with no overload before it: the baseline that
recovery is judged against, second by second. The bench's own figure compares with the 10 s
before the overload, which start from an empty engine and are quieter than the steady state
at the same load.

Printed per path (gateway, direct): online TTFT p50 per second after the overload in both
runs, and the first second after which every second is within 2x (+25 ms) of the control's.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

AFTER_S = 30  # the bench's phase after the overload
BEFORE_S = 10.0  # and before it


def per_second(report: dict[str, Any], path: str) -> list[float | None]:
    """Online TTFT p50 (s) in each second after the overload, for the requests of `path`."""
    end = BEFORE_S + float(report["overload_s"])
    rows = [r for r in report["requests"] if r[1] == "online" and r[0] == path]
    out: list[float | None] = []
    for k in range(AFTER_S):
        window = [r[3] for r in rows if end + k <= r[2] < end + k + 1 and r[3] is not None]
        out.append(statistics.median(window) if window else None)
    return out


def back_after(run: list[float | None], control: list[float | None]) -> int | None:
    """The first second with requests in both from which on every second (with requests in
    both: a second without an online request sent in it, Poisson, says nothing) is within 2x
    (+25 ms) of the control's; None when there is none. The one definition of "back"."""
    pairs = list(zip(run, control, strict=True))
    ok = [a is None or c is None or a <= max(2 * c, c + 0.025) for a, c in pairs]
    for k, (a, c) in enumerate(pairs):
        if a is not None and c is not None and all(ok[k:]):
            return k
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    run, control = (json.loads(Path(p).read_text()) for p in argv)
    for name in ("gateway", "direct"):
        if name not in run or name not in control:
            continue
        a = per_second(run, run[name]["target"])
        c = per_second(control, control[name]["target"])
        fmt = " ".join("-" if v is None else f"{v:.2f}" for v in a)
        print(f"{name}: after the overload  {fmt}")
        fmt = " ".join("-" if v is None else f"{v:.2f}" for v in c)
        print(f"{name}: control, same load  {fmt}")
        print(f"{name}: back within 2x (+25 ms) of the control from second {back_after(a, c)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
