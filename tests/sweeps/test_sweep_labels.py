"""Names and errors a sweep shows an operator: each trial's version is named for its sweep and
trial (not `sweep1-default v2`, easily read as `default v2`) and made from the base; a path
that names no field is refused under `variables[0].path` (issue 58)."""

from __future__ import annotations

from typing import Any

from tests.sweeps.api_helpers import WAIT, body, make_node


def test_an_unknown_path_is_refused_under_the_path(api: Any, operator: Any) -> None:
    setup = make_node()
    bad = "scheduler.queues.online.max_wait_ms"
    response = api(operator).post(
        "/api/v1/sweeps/",
        body(setup["node"], variables=[{"path": bad, "values": [1, 5]}]),
        format="json",
    )
    assert response.status_code == 400, response.content
    errors = response.json()
    assert list(errors) == ["variables[0].path"], errors
    [message] = errors["variables[0].path"]
    assert message.startswith(f"{bad} is not a field of the base version;")
    assert "scheduler.queues.online has: " in message and "max_waiting_time_ms" in message
    # A tier the base does not have is named the same way.
    other = api(operator).post(
        "/api/v1/sweeps/",
        body(
            setup["node"], variables=[{"path": "scheduler.queues.premium.priority", "values": [4]}]
        ),
        format="json",
    )
    assert list(other.json()) == ["variables[0].path"]
    assert "scheduler.queues has: batch, online" in other.json()["variables[0].path"][0]
    # A bad value on a real path is still named by its value.
    value = api(operator).post(
        "/api/v1/sweeps/",
        body(setup["node"], variables=[{"path": WAIT, "values": [1, -5]}]),
        format="json",
    )
    assert list(value.json()) == ["variables[0].values[1]"]


def test_a_trials_version_is_named_for_its_sweep_and_trial(api: Any, operator: Any) -> None:
    from console.bench.sweeps.models import Sweep, SweepTrial
    from console.bench.sweeps.trials import version_of
    from console.tuning.models import TierConfigVersion

    setup = make_node()
    created = api(operator).post("/api/v1/sweeps/", body(setup["node"]), format="json")
    assert created.status_code == 201, created.content
    sweep = Sweep.objects.get(pk=created.json()["id"])
    labels = []
    for index, wait in enumerate((1, 5), start=1):
        trial = SweepTrial.objects.create(
            sweep=sweep,
            index=index,
            values={WAIT: wait},
            document=setup["tiers"].config,
        )
        version = version_of(sweep, trial)
        assert isinstance(version, TierConfigVersion)
        assert version.parent_id == setup["tiers"].pk  # its page diffs against the base
        labels.append(version.label)
    assert labels == [f"tiers-sweep{sweep.pk}-trial1 v1", f"tiers-sweep{sweep.pk}-trial2 v1"]
    # The base's own name holds only its own versions.
    base_name = TierConfigVersion.objects.filter(name="tiers")
    assert list(base_name.values_list("version", flat=True)) == [1]
