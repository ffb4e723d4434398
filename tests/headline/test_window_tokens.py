"""Output tokens streamed inside a headline arm's measured window
(console/bench/headline/arms.py `tokens_in_window`): the client keeps no time per token, so
the first counts at its first-token time and the rest are spread evenly until the end; and the
engine's own counters read over the window (telemetry.py `counter_rate`)."""

from __future__ import annotations

import pytest

from console.bench.headline.arms import tokens_in_window
from console.bench.headline.telemetry import counter_rate
from loadgen import RequestSample


def _sample(send: float, ttft: float, e2e: float, tokens: int, **kw: object) -> RequestSample:
    return RequestSample(index=0, send_time=send, ttft=ttft, e2e=e2e, output_tokens=tokens,
                         status=200, **kw)  # type: ignore[arg-type]  # fmt: skip


def test_each_request_counts_the_part_it_streamed_inside_the_window() -> None:
    window = (1000.0, 6.0)  # [1000, 1006]
    across_the_end = _sample(1000, 1, 11, 11)  # first at 1001, 10 more over 1001-1011: 5 inside
    short_inside = _sample(1001, 1, 2, 1)  # one token, at 1002
    after = _sample(1007, 1, 3, 50)  # all after the window
    from_warmup = _sample(995, 1, 6, 4)  # first at 996 (outside), 3 more over 996-1001: 1/5
    failed = _sample(1001, 1, 2, 9, error="HTTP 500")
    no_first_token = RequestSample(index=1, send_time=1001, output_tokens=3)
    samples = [across_the_end, short_inside, after, from_warmup, failed, no_first_token]
    assert tokens_in_window(samples, *window) == pytest.approx((1 + 5 + 1 + 0.6) / 6)


def test_tokens_do_not_favour_finishing_short_requests_first() -> None:
    """Two schedules of the same work over a 10 s window: one short and one long request
    in turn, or the long one held to the end. By requests done the second looks better;
    by tokens streamed it is what it is: less work done in the window."""
    in_turn = [_sample(1000, 0, 2, 8), _sample(1002, 0, 8, 64)]  # both inside
    held = [_sample(1000, 0, 2, 8), _sample(1002, 0, 1, 8), _sample(1003, 6, 14, 64)]

    def done(samples: list[RequestSample]) -> int:
        return sum(1000 <= s.end_time <= 1010 for s in samples)

    assert done(held) == done(in_turn) == 2
    assert tokens_in_window(held, 1000, 10) < tokens_in_window(in_turn, 1000, 10)
    assert tokens_in_window(in_turn, 1000, 10) == pytest.approx(72 / 10)


def test_counter_rate_reads_the_rise_between_the_first_and_last_point_in_the_window() -> None:
    points = [
        {"t": 99.0, "generated": 0.0},  # before the window
        {"t": 100.5, "generated": 100.0},
        {"t": 101.5, "running": 3.0},  # no counter in this point
        {"t": 102.5, "generated": 400.0},
        {"t": 104.5, "generated": 900.0},
        {"t": 106.0, "generated": 5000.0},  # after it
    ]
    assert counter_rate(points, "generated", 100.0, 105.0) == pytest.approx(800 / 4)
    assert counter_rate(points, "generated", 100.0, 101.0) is None  # one point
    assert counter_rate(points, "absent", 0.0, 200.0) is None
    restarted = [{"t": 1.0, "generated": 50.0}, {"t": 2.0, "generated": 3.0}]
    assert counter_rate(restarted, "generated", 0.0, 3.0) is None
