"""The one percentile definition (nearest rank, docs/metrics.md), and the scheduler's stdlib
copy held equal to it."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadgen import percentile, percentiles
from loadgen.percentiles import of_sorted, rank
from scheduler.stats import nearest_rank

QS = (0, 1, 5, 7, 10, 25, 50, 75, 90, 95, 99, 99.9, 100)


def test_a_percentile_is_the_value_at_rank_ceil_q_n() -> None:
    values = [float(i) for i in range(1, 11)]
    assert percentile(values, 50) == 5.0  # rank 5: not 5.5 between two requests
    assert percentile(values, 90) == 9.0
    assert percentile(values, 99) == 10.0
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 10.0
    assert percentiles(reversed(values), [10, 20]) == [1.0, 2.0]  # any order
    assert percentile(np.array([0.3, 0.1, 0.2]), 50) == 0.2
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


def test_ranks_have_no_float_slop() -> None:
    for n in range(1, 400):
        for q in ("7", "50", "90", "99", "99.9"):
            assert rank(n, float(q)) == max(1, math.ceil(Fraction(q) / 100 * n)), (n, q)


def test_the_scheduler_copy_equals_the_definition_on_fixed_edges() -> None:
    for n in (1, 2, 3, 10, 99, 100, 101, 1000):
        ordered = [float(i) for i in range(n)]
        for q in QS:
            assert (
                nearest_rank(ordered, q / 100) == of_sorted(ordered, q) == percentile(ordered, q)
            ), (n, q)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=300),
    st.floats(0, 100),
)
def test_the_scheduler_copy_equals_the_definition_on_random_inputs(
    values: list[float], q: float
) -> None:
    assert nearest_rank(sorted(values), q / 100) == percentile(values, q)


def test_the_scheduler_copy_equals_the_definition_on_large_random_inputs() -> None:
    rng = random.Random(13)
    for _ in range(200):
        values = [rng.expovariate(5.0) for _ in range(rng.randint(1, 20_000))]
        ordered = sorted(values)
        for q in (*QS, rng.uniform(0, 100)):
            assert nearest_rank(ordered, q / 100) == percentile(values, q), (len(values), q)
