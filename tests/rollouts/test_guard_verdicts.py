"""The guard's verdicts on thin figures, a probe's figures, the probe's tier mix and what a
rollout says it was guarded by (pure, or the database alone)."""

from __future__ import annotations

from typing import Any

from console.tuning.rollouts.guard import (
    FAILED,
    PASSED,
    UNJUDGED,
    WindowStats,
    evaluate,
    from_samples,
    pooled,
)
from loadgen import RequestSample

BUSY = WindowStats(finished=40, errors=0, rejected=0, ttft_p99_s=0.05)


def test_no_request_after_the_change_is_never_a_pass() -> None:
    for after in (WindowStats(0, 0, 0, None), WindowStats(3, 0, 0, None)):
        result = evaluate(BUSY, after, max_ttft_p99_regression_pct=None, max_error_rate=0.05)
        assert result.verdict == UNJUDGED and not result.passed and result.requests == 0
        assert result.message.startswith("SLO guard could not judge: error-rate check skipped")


def test_a_pass_names_the_requests_it_rests_on_and_a_breach_fails_on_its_own() -> None:
    passed = evaluate(BUSY, BUSY, max_ttft_p99_regression_pct=50, max_error_rate=0.05)
    assert passed.verdict == PASSED and passed.requests == 40
    assert passed.message.startswith("SLO guard passed, guarded by 40 requests")
    # An error rate judged over the limit fails even when the TTFT could not be compared.
    broken = WindowStats(finished=10, errors=5, rejected=0, ttft_p99_s=None)
    failed = evaluate(
        WindowStats(0, 0, 0, None), broken, max_ttft_p99_regression_pct=50, max_error_rate=0.05
    )
    assert failed.verdict == FAILED and failed.requests == 10
    assert "error rate 50.0 %" in failed.message and "guarded by 10 requests" in failed.message


def sample(tier: str, ttft: float | None, error: str | None = None) -> RequestSample:
    return RequestSample(index=0, send_time=0.0, tier=tier, ttft=ttft, error=error)


def test_a_probe_counts_every_request_and_takes_the_p99_of_the_guarded_tier() -> None:
    samples = [sample("online", 0.010 * (i + 1)) for i in range(10)]
    samples += [sample("batch", 5.0), sample("online", None, error="HTTP 503")]
    stats = from_samples(samples, "online")
    assert (stats.finished, stats.errors) == (12, 1)
    assert stats.ttft_p99_s == 0.1  # nearest rank over the ten online answers; batch's 5 s aside
    assert from_samples(samples[:4], "online").ttft_p99_s is None  # too few for a P99
    both = pooled([stats, WindowStats(12, 0, 0, 0.2)])
    assert (both.finished, both.errors) == (24, 1) and abs((both.ttft_p99_s or 0) - 0.15) < 1e-9


def test_the_probe_spreads_over_the_config_tiers_its_key_may_use_half_to_the_guarded(
    db: None,
) -> None:
    from console.tuning.rollouts.probe import Target, tier_mix

    def target(*tiers: str) -> Target:
        return Target("n", "http://x/v1", "k", "m", frozenset(tiers))

    tiers = ["online", "batch", "offline"]
    assert tier_mix(tiers, [target(*tiers)], "online") == {
        "online": 0.5,
        "batch": 0.25,
        "offline": 0.25,
    }
    assert tier_mix(tiers, [target("online", "batch"), target(*tiers)], "online") == {
        "online": 0.5,
        "batch": 0.5,
    }
    assert tier_mix(tiers, [target("online")], "online") == {"online": 1.0}


def test_what_a_rollout_says_it_was_guarded_by(db: None) -> None:
    from console.tuning.rollouts.models import Rollout

    def coverage(**fields: Any) -> str:
        # The model's own defaults have no guard: services.create_rollout gives the guard.
        return Rollout(**{"guard_max_error_rate": 0.05, **fields}).guard_coverage

    assert coverage(state="running") == "not judged yet"
    assert coverage(state="succeeded", guarded_requests=80) == "guarded by 80 requests"
    assert coverage(state="succeeded", unguarded_waves=1) == "unguarded (1 wave(s) unguarded)"
    assert (
        coverage(state="succeeded", guarded_requests=40, unguarded_waves=1)
        == "guarded by 40 requests; 1 wave(s) unguarded"
    )
    assert coverage(state="succeeded", guard_max_error_rate=None) == "unguarded (no SLO guard)"
    assert coverage(kind="rollback", state="succeeded") == ""


def test_the_api_names_a_bad_quiet_setting(api: Any, operator: Any, db: None) -> None:
    from console.tuning.services import create_tier_config
    from tests.rollouts.rollout_helpers import tier_config

    version = create_tier_config(name="tiers", config=tier_config(1), message="v1")
    for body, field in (
        ({"guard_when_quiet": "hope"}, "guard_when_quiet"),
        ({"guard_probe_s": 0.5}, "guard_probe_s"),
        ({"guard_probe_s": 600}, "guard_probe_s"),
    ):
        response = api(operator).post(
            "/api/v1/rollouts/", {"tier_config": version.pk, **body}, format="json"
        )
        assert response.status_code == 400 and field in response.json(), response.json()
