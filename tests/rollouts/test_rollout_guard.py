"""The SLO guard over heartbeat `tiers` figures."""

from __future__ import annotations

from typing import Any

from console.tuning.rollouts.guard import evaluate, summarise


def tiers(
    finished: int, p99: float | None, errors: int = 0, rejected: int = 0, tier: str = "online"
) -> dict[str, Any]:
    return {
        tier: {
            "finished": finished,
            "errors": errors,
            "rejected": rejected,
            "ttft_p50_s": p99,
            "ttft_p99_s": p99,
        }
    }


def test_p99_is_weighted_by_requests_finished_per_second() -> None:
    stats = summarise([tiers(9, 0.1), tiers(1, 1.0)], "online")
    assert stats.finished == 10
    assert abs((stats.ttft_p99_s or 0) - 0.19) < 1e-9


def test_too_few_requests_give_no_p99() -> None:
    assert summarise([tiers(3, 0.5)], "online").ttft_p99_s is None


def test_a_big_regression_fails_and_says_by_how_much() -> None:
    before = summarise([tiers(20, 0.05)], "online")
    after = summarise([tiers(20, 0.50)], "online")
    result = evaluate(before, after, max_ttft_p99_regression_pct=50, max_error_rate=None)
    assert not result.ok
    assert "50 ms -> 500 ms" in result.message and "+900 %" in result.message


def test_a_regression_within_the_limit_passes() -> None:
    before, after = summarise([tiers(20, 0.10)], "online"), summarise([tiers(20, 0.12)], "online")
    assert evaluate(before, after, max_ttft_p99_regression_pct=50, max_error_rate=None).ok


def test_tiny_absolute_changes_are_noise() -> None:
    before, after = summarise([tiers(20, 0.002)], "online"), summarise([tiers(20, 0.006)], "online")
    assert evaluate(before, after, max_ttft_p99_regression_pct=10, max_error_rate=None).ok


def test_errors_and_rejections_count_against_the_error_rate() -> None:
    before = summarise([tiers(10, 0.1)], "online")
    after = summarise(
        [tiers(10, 0.1, errors=1), tiers(0, None, rejected=2, tier="batch")], "online"
    )
    assert after.error_rate == 3 / 12
    result = evaluate(before, after, max_ttft_p99_regression_pct=None, max_error_rate=0.1)
    assert not result.ok and "error rate 25.0 %" in result.message


def test_no_baseline_traffic_skips_the_ttft_check_and_says_so() -> None:
    result = evaluate(
        summarise([], "online"),
        summarise([tiers(20, 0.5)], "online"),
        max_ttft_p99_regression_pct=10,
        max_error_rate=None,
    )
    assert result.ok and "skipped" in result.message
