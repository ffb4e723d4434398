"""lab.burner: a real process that takes its share of a core, counted from when it burns."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from lab import burner
from lab.cpu_by_process import cpu_seconds, label


def test_a_burner_takes_its_share_from_when_it_says_it_burns() -> None:
    with burner.burner(0.2) as pid:
        assert label(pid) == "burner"  # the CPU sampler tells it from the load generator
        cpu0, t0 = cpu_seconds(pid), time.time()
        assert cpu0 is not None and cpu0 < 0.5
        time.sleep(1.5)
        share = ((cpu_seconds(pid) or 0.0) - cpu0) / (time.time() - t0)
    # its interpreter's start-up is not in it (that alone was up to 0.4 of a core in 3 s)
    assert 0.1 < share < 0.3, share
    assert cpu_seconds(pid) is None  # and it is gone once the block is left


@pytest.mark.parametrize("argv", [[], ["x"], ["0"], ["1"], ["1.5"]])
def test_a_burner_refuses_a_share_outside_zero_to_one(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lab.burner", *argv], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2
    assert "a share of one core, in (0, 1)" in done.stderr
    assert done.stdout == ""  # it never said it burns
