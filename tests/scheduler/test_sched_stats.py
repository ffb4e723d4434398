def test_nearest_rank_is_ceil_q_n_without_float_slop() -> None:
    from fractions import Fraction
    from math import ceil

    from gpu_agent.metrics import percentile
    from scheduler.stats import nearest_rank

    for n in range(1, 400):
        values = [float(i) for i in range(1, n + 1)]
        for q in ("0.07", "0.5", "0.9", "0.99", "0.999"):
            expected = values[max(1, ceil(Fraction(q) * n)) - 1]
            assert nearest_rank(values, float(q)) == expected, (n, q)
            assert percentile(values, float(q)) == expected, (n, q)
    assert percentile([], 0.5) is None
