"""The pure rules: waves, and one node's progress under a fake clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from console.tuning.rollouts.plan import (
    APPLIED,
    FAILED,
    HEALTHY,
    WAITING,
    NodeFacts,
    Restore,
    assign_waves,
    is_healthy,
    progress,
    restore,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
OK = {"gateway": "ok", "engine": "ok", "detail": ""}


@pytest.mark.parametrize(
    ("count", "canary", "size", "waves"),
    [
        (5, 1, 0, [0, 1, 1, 1, 1]),
        (5, 1, 2, [0, 1, 1, 2, 2]),
        (5, 0, 2, [0, 0, 1, 1, 2]),
        (2, 5, 0, [0, 0]),
        (1, 0, 0, [0]),
        (0, 1, 0, []),
        (100, 1, 0, [0] + [1] * 99),
    ],
)
def test_waves_put_canaries_first_then_groups_of_wave_size(
    count: int, canary: int, size: int, waves: list[int]
) -> None:
    assert assign_waves(count, canary, size) == waves


def facts(
    applied: int | None = 1,
    *,
    seen: float = 0.0,
    errors: dict | None = None,
    health: dict | None = None,
) -> NodeFacts:
    return NodeFacts(
        applied={"tier_config": applied, "launch_profile": None},
        apply_errors=errors or {},
        health=OK if health is None else health,
        last_seen_at=T0 + timedelta(seconds=seen),
    )


def verdict(f: NodeFacts, now_s: float, target: int = 2, timeout: float = 10.0) -> tuple[str, str]:
    v = progress(
        f,
        {"tier_config": target, "launch_profile": None},
        now=T0 + timedelta(seconds=now_s),
        since=T0,
        timeout_s=timeout,
        fresh_s=5.0,
    )
    return v.state, v.error


def test_a_node_waits_until_it_reports_the_target_then_is_healthy() -> None:
    assert verdict(facts(1, seen=1), 1.5)[0] == WAITING
    assert verdict(facts(2, seen=2), 2.1)[0] == HEALTHY


def test_applied_but_engine_not_ok_is_applied_not_healthy() -> None:
    assert (
        verdict(facts(2, seen=2, health={"gateway": "ok", "engine": "starting"}), 2.1)[0] == APPLIED
    )


def test_an_apply_error_for_the_target_fails_at_once_with_the_agents_text() -> None:
    state, error = verdict(
        facts(1, seen=1, errors={"tier_config": {"version": 2, "error": "bad queue"}}), 1.1
    )
    assert state == FAILED and "bad queue" in error


def test_an_apply_error_for_another_version_is_ignored() -> None:
    assert (
        verdict(facts(1, seen=1, errors={"tier_config": {"version": 7, "error": "old"}}), 1.1)[0]
        == WAITING
    )


def test_timeout_names_a_silent_agent() -> None:
    state, error = verdict(facts(1, seen=0), 10.5)
    assert state == FAILED and "not reporting" in error


def test_timeout_of_a_reporting_agent_that_never_applied() -> None:
    state, error = verdict(facts(1, seen=10.2), 10.5)
    assert state == FAILED and "has not reported the new version applied" in error


def test_a_stale_node_is_not_healthy_even_when_applied() -> None:
    assert verdict(facts(2, seen=0), 6.0)[0] == APPLIED


@pytest.mark.parametrize(
    ("desired", "applied", "expected"),
    [
        (3, 2, Restore(3, False)),  # it desired 3: 3 again
        (3, None, Restore(3, False)),
        (None, 2, Restore(2, True)),  # it ran 2, desired nothing: back to 2, then unset
        (None, None, Restore(None, True)),  # nothing known: unset at once
    ],
)
def test_restore_is_exactly_the_state_before(
    desired: int | None, applied: int | None, expected: Restore
) -> None:
    assert restore(desired, applied) == expected


def test_an_open_apply_error_of_another_kind_keeps_a_node_from_healthy() -> None:
    error = {"version": 4, "error": "engine exited with code 2"}
    failing = NodeFacts(
        applied={"tier_config": 2, "launch_profile": None},
        apply_errors={"launch_profile": error},
        health=OK,
        last_seen_at=T0 + timedelta(seconds=10),
    )
    assert not is_healthy(failing, T0, 5.0)
    state, message = verdict(failing, 10.5)
    assert state == FAILED and "open launch_profile apply error: engine exited" in message
    acknowledged = NodeFacts(
        **{**failing.__dict__, "acknowledged_errors": {"launch_profile": error}}
    )
    assert is_healthy(acknowledged, T0, 5.0)
    assert verdict(acknowledged, 0.1)[0] == HEALTHY


def test_the_canary_soaks_and_later_waves_are_watched_only_with_a_guard() -> None:
    from console.tuning.rollouts.models import Rollout

    defaults = Rollout()
    assert defaults.canary_soak_s == 60.0 and defaults.stale_targets == "exclude"
    guarded = Rollout(canary_count=1, canary_soak_s=60, guard_max_error_rate=0.05)
    assert guarded.observation_s(0) == 60 and guarded.observation_s(1) == 30
    unguarded = Rollout(canary_count=1, canary_soak_s=5)
    assert unguarded.observation_s(0) == 5 and unguarded.observation_s(1) == 0
    no_canary = Rollout(canary_count=0, canary_soak_s=60, guard_max_error_rate=0.05)
    assert no_canary.observation_s(0) == 30
    no_soak = Rollout(canary_count=1, canary_soak_s=0, guard_max_error_rate=0.05)
    assert no_soak.observation_s(0) == 30
    assert Rollout(kind="rollback", canary_count=1, guard_max_error_rate=0.05).observation_s(0) == 0
