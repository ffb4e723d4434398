"""A sweep owns its node's desired versions until it ends: no hand change (unset, or a new
desired version through the node's API) and no rollout may touch the node meanwhile, and a
sweep is refused on a node an unfinished rollout owns. Once the sweep ends, all work again."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sweeps.api_helpers import body, make_node


@pytest.fixture
def pending_sweep(db: None, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    from console.bench.sweeps import tasks
    from console.bench.sweeps.services import create_sweep

    monkeypatch.setattr(tasks, "enqueue", lambda sweep: None)  # no worker: it stays pending
    setup = make_node()
    setup["sweep"] = create_sweep(body(setup["node"]), None)
    return setup


def test_no_hand_change_of_the_nodes_desired_versions_while_a_sweep_runs(
    pending_sweep: dict[str, Any], operator: Any, admin_user: Any, api: Any
) -> None:
    from console.tuning.services import create_tier_config
    from tests.sweeps.api_helpers import tier_config

    node, sweep = pending_sweep["node"], pending_sweep["sweep"]
    other = create_tier_config(name="tiers", config=tier_config(5), message="v2")
    r = api(operator).post(f"/api/v1/nodes/{node.pk}/unset-desired/", {"kind": "tier_config"})
    assert r.status_code == 400, r.content
    assert f"under sweep #{sweep.pk}" in str(r.json()) and "cancel it first" in str(r.json())
    r = api(admin_user).patch(
        f"/api/v1/nodes/{node.pk}/", {"desired_tier_config": other.pk}, format="json"
    )
    assert r.status_code == 400, r.content
    assert "desired_tier_config" in r.json() and f"sweep #{sweep.pk}" in str(r.json())
    node.refresh_from_db()
    assert node.desired_tier_config_id == pending_sweep["tiers"].pk  # nothing written
    # Renaming the node is no change of its versions: allowed.
    r = api(admin_user).patch(f"/api/v1/nodes/{node.pk}/", {"labels": ["x"]}, format="json")
    assert r.status_code == 200, r.content

    api(operator).post(f"/api/v1/sweeps/{sweep.pk}/cancel/")  # pending: ends at once
    r = api(admin_user).patch(
        f"/api/v1/nodes/{node.pk}/", {"desired_tier_config": other.pk}, format="json"
    )
    assert r.status_code == 200, r.content


def test_a_rollout_refuses_a_node_under_a_sweep(pending_sweep: dict[str, Any]) -> None:
    from console.tuning.rollouts.services import create_rollout
    from console.tuning.rollouts.targets import RolloutError
    from console.tuning.services import create_tier_config
    from tests.sweeps.api_helpers import tier_config

    node, sweep = pending_sweep["node"], pending_sweep["sweep"]
    v2 = create_tier_config(name="tiers", config=tier_config(5), message="v2")
    with pytest.raises(RolloutError) as refused:
        create_rollout(tier_config=v2, selection="nodes", nodes=[node], start=False)
    assert refused.value.field == "nodes" and f"sweep #{sweep.pk}" in str(refused.value)


def test_a_sweep_refuses_a_node_under_an_unfinished_rollout(
    db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from console.bench.sweeps import tasks
    from console.bench.sweeps.inputs import SweepError
    from console.bench.sweeps.services import create_sweep
    from console.tuning.rollouts.services import create_rollout
    from console.tuning.services import create_tier_config
    from tests.sweeps.api_helpers import tier_config

    monkeypatch.setattr(tasks, "enqueue", lambda sweep: None)
    setup = make_node()
    v2 = create_tier_config(name="tiers", config=tier_config(5), message="v2")
    rollout = create_rollout(tier_config=v2, selection="nodes", nodes=[setup["node"]], start=False)
    with pytest.raises(SweepError) as refused:
        create_sweep(body(setup["node"]), None)
    assert refused.value.field == "node" and f"rollout #{rollout.pk}" in str(refused.value)
