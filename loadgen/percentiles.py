"""The percentile of Tiergate: nearest rank (docs/metrics.md, "Percentiles").

The q-th percentile of n values is the value at rank ceil(q/100 * n) of the sorted values
(1-based; rank 1 for q = 0): the smallest value with at least q % of the values at or below it.
It is always a value that was measured, and "P99 = 412 ms" reads as "99 % of the requests took
412 ms or less", which is what an operator checks against an SLO. Every percentile the product
shows or compares is this one: the load generator's summaries and progress, the console's
comparisons and charts, the lab/ scripts. The scheduler (which may not import this package)
keeps a stdlib copy, `scheduler.stats.nearest_rank`, that tests/loadgen/test_percentiles.py
holds equal to this one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt


def rank(n: int, q: float) -> int:
    """The 1-based rank of the q-th percentile (q in per cent) among n > 0 values."""
    # Rounded first so that 7 % of 100 (7.000000000000001 in floats) ranks 7, not 8.
    return max(1, min(n, math.ceil(round(q / 100 * n, 9))))


Values = Iterable[float] | npt.NDArray[np.float64]


def percentiles(values: Values, qs: Sequence[float]) -> list[float]:
    """The qs-th percentiles of the values (any order, at least one), from one sort."""
    array = values if isinstance(values, np.ndarray) else np.fromiter(values, dtype=float)
    ordered = np.sort(array)
    n = ordered.size
    if n == 0:
        raise ValueError("a percentile of no values")
    return [float(ordered[rank(n, q) - 1]) for q in qs]


def percentile(values: Values, q: float) -> float:
    """The q-th percentile (q in per cent) of the values (any order, at least one)."""
    return percentiles(values, [q])[0]


def of_sorted(ordered: Sequence[float] | npt.NDArray[np.float64], q: float) -> float:
    """The q-th percentile of values already sorted ascending (at least one)."""
    return float(ordered[rank(len(ordered), q) - 1])
