"""Adopting a sweep's trial through the API: a new version under the base's name whose message
cites the sweep and trial, and a rollout of it to the node with the SLO guard, made by the
rollouts' own services, audited; refused (naming the field, nothing written) otherwise."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sweeps.api_helpers import WAIT, body, finish, make_node

URL = "/api/v1/sweeps/"


@pytest.fixture
def setup(db: None) -> dict[str, Any]:
    return make_node()


def _sweep(api: Any, user: Any, node: Any, **overrides: Any) -> Any:
    from console.bench.sweeps.models import Sweep

    response = api(user).post(URL, body(node, **overrides), format="json")
    assert response.status_code == 201, response.json()
    return Sweep.objects.get(pk=response.json()["id"])


def _counts() -> tuple[int, int, int]:
    from console.tuning.models import LaunchProfileVersion, TierConfigVersion
    from console.tuning.rollouts.models import Rollout

    return (
        TierConfigVersion.objects.count(),
        LaunchProfileVersion.objects.count(),
        Rollout.objects.count(),
    )


def test_adopting_a_trial_makes_a_version_and_a_guarded_rollout_of_it(
    api: Any, operator: Any, setup: dict[str, Any]
) -> None:
    from console.audit.models import AuditEvent
    from console.tuning.models import TierConfigVersion
    from console.tuning.rollouts.models import Rollout
    from console.tuning.rollouts.services import (
        DEFAULT_GUARD_ERROR_RATE,
        DEFAULT_GUARD_TTFT_P99_REGRESSION_PCT,
    )

    sweep = _sweep(api, operator, setup["node"])
    finish(sweep, [{"values": {WAIT: 1}, "objective_value": 40.0}, {"values": {WAIT: 5}}])
    response = api(operator).post(f"{URL}{sweep.pk}/adopt/", {"trial": 1}, format="json")
    assert response.status_code == 201, response.json()
    shown = response.json()

    version = TierConfigVersion.objects.get(name="tiers", version=2)
    assert version.message == f"adopted from sweep #{sweep.pk} trial 1: {WAIT}=1"
    assert version.config["scheduler"]["queues"]["online"]["max_waiting_time_ms"] == 1
    assert version.author == operator

    rollout = Rollout.objects.get()
    assert rollout.tier_config == version and rollout.launch_profile is None
    assert list(rollout.nodes.values_list("node_id", flat=True)) == [setup["node"].pk]
    assert rollout.guard_max_ttft_p99_regression_pct == DEFAULT_GUARD_TTFT_P99_REGRESSION_PCT
    assert rollout.guard_max_error_rate == DEFAULT_GUARD_ERROR_RATE
    assert rollout.has_guard and rollout.state == "pending"
    assert rollout.message == version.message and rollout.created_by == operator

    sweep.refresh_from_db()
    assert sweep.adopted_trial.index == 1 and sweep.adopted_rollout == rollout
    assert shown["rollout"]["id"] == rollout.pk and shown["rollout"]["target"] == "tiers v2"
    assert shown["sweep"]["adopted_trial"] == sweep.adopted_trial_id
    assert shown["sweep"]["adopted_rollout"] == rollout.pk

    audit = AuditEvent.objects.filter(actor=operator)
    assert audit.filter(
        object_type="bench.sweep", object_id=str(sweep.pk), action="update"
    ).exists()
    assert audit.filter(object_type="tuning.rollout", object_id=str(rollout.pk)).exists()
    assert audit.filter(
        object_type="tuning.tierconfigversion", object_id=str(version.pk), action="create"
    ).exists()


def test_adopting_a_launch_profile_trial_rolls_the_profile_out(api: Any, operator: Any) -> None:
    from console.tuning.models import LaunchProfileVersion
    from console.tuning.rollouts.models import Rollout

    made = make_node("gpu-p", profile=True)
    sweep = _sweep(
        api,
        operator,
        made["node"],
        kind="launch_profile",
        variables=[{"path": "max_num_seqs", "values": [8, 64]}],
    )
    finish(sweep, [{"values": {"max_num_seqs": 8}}, {"values": {"max_num_seqs": 64}}])
    response = api(operator).post(f"{URL}{sweep.pk}/adopt/", {"trial": 2}, format="json")
    assert response.status_code == 201, response.json()
    version = LaunchProfileVersion.objects.get(name="engine", version=2)
    assert version.args["max_num_seqs"] == 64
    assert version.message == f"adopted from sweep #{sweep.pk} trial 2: max_num_seqs=64"
    rollout = Rollout.objects.get()
    assert rollout.launch_profile == version and rollout.tier_config is None
    assert rollout.has_guard


@pytest.mark.parametrize(
    ("arrange", "trial", "code", "field", "words"),
    [
        ("running", 1, 409, "status", "still running"),
        ("not_restored", 1, 409, "restored", "not back on its base"),
        ("finished", 2, 400, "trial", "not feasible: online TTFT P99 812 ms > cap 500 ms"),
        ("finished", 3, 400, "trial", "failed, not succeeded"),
        ("finished", 0, 400, "trial", "the base"),
        ("finished", 9, 400, "trial", "no trial 9"),
        ("adopted", 1, 409, "adopted_trial", "already adopted"),
    ],
)
def test_adoption_is_refused_naming_the_field_and_nothing_is_written(
    api: Any,
    operator: Any,
    setup: dict[str, Any],
    arrange: str,
    trial: int,
    code: int,
    field: str,
    words: str,
) -> None:
    from console.bench.sweeps.models import Sweep

    sweep = _sweep(api, operator, setup["node"])
    finish(
        sweep,
        [
            {"values": {WAIT: 1}},
            {
                "values": {WAIT: 5},
                "feasible": False,
                "violations": ["online TTFT P99 812 ms > cap 500 ms"],
            },
            {"values": {WAIT: 20}, "status": "failed", "feasible": False},
        ],
    )
    if arrange == "running":
        Sweep.objects.filter(pk=sweep.pk).update(status="running")
    elif arrange == "not_restored":
        Sweep.objects.filter(pk=sweep.pk).update(restored=False)
    elif arrange == "adopted":
        first = api(operator).post(f"{URL}{sweep.pk}/adopt/", {"trial": 1}, format="json")
        assert first.status_code == 201
    before = _counts()
    response = api(operator).post(f"{URL}{sweep.pk}/adopt/", {"trial": trial}, format="json")
    assert response.status_code == code, response.json()
    assert words in response.json()[field][0]
    assert _counts() == before


def test_a_failed_rollout_check_undoes_the_new_version(
    api: Any, operator: Any, setup: dict[str, Any]
) -> None:
    """The rollout refuses a node under another unfinished rollout: the version made for it
    is rolled back too, and the sweep stays unadopted."""
    from console.tuning.rollouts.services import create_rollout
    from console.tuning.services import create_tier_config
    from tests.sweeps.api_helpers import tier_config

    sweep = _sweep(api, operator, setup["node"])
    finish(sweep, [{"values": {WAIT: 1}}])
    other = create_tier_config(name="other", config=tier_config(3))
    create_rollout(tier_config=other, selection="nodes", nodes=[setup["node"]], start=False)
    before = _counts()
    response = api(operator).post(f"{URL}{sweep.pk}/adopt/", {"trial": 1}, format="json")
    assert response.status_code == 409
    assert "unfinished" in response.json()["nodes"][0]
    assert _counts() == before
    sweep.refresh_from_db()
    assert sweep.adopted_trial is None and sweep.adopted_rollout is None
