"""Read-only admin, the demo seeder, model immutability and the OpenAPI schema."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from console.core.demo import DEMO_SEEDERS, run_seeders
from console.fleet.models import Node
from console.tuning import services
from console.tuning.demo import seed
from console.tuning.models import LaunchProfileVersion, TierConfigVersion


def test_the_admin_lists_versions_but_cannot_add_change_or_delete(
    admin_user: Any, seed_tiers: dict[str, Any]
) -> None:
    admin_user.is_staff = admin_user.is_superuser = True
    admin_user.save()
    obj = services.create_tier_config(name="default", config=seed_tiers, user=admin_user)
    client = Client()
    client.force_login(admin_user)
    assert "default" in client.get("/admin/tuning/tierconfigversion/").content.decode()
    assert client.get("/admin/tuning/tierconfigversion/add/").status_code == 403
    change = client.get(f"/admin/tuning/tierconfigversion/{obj.pk}/change/")
    assert change.status_code == 200 and "Save" not in change.content.decode()
    client.post(f"/admin/tuning/tierconfigversion/{obj.pk}/delete/", {"post": "yes"})
    assert TierConfigVersion.objects.filter(pk=obj.pk).exists()
    assert client.get("/admin/tuning/launchprofileversion/").status_code == 200


def test_a_saved_version_cannot_be_saved_again(operator: Any, seed_tiers: dict[str, Any]) -> None:
    obj = services.create_tier_config(name="x", config=seed_tiers, user=operator)
    obj.message = "edited"
    with pytest.raises(ValueError, match="immutable"):
        obj.save()


def test_the_demo_seeder_is_registered_and_idempotent(
    admin_user: Any, seed_tiers: dict[str, Any]
) -> None:
    # The fleet's nodes first, then the versions they are set to want.
    assert DEMO_SEEDERS.index("console.fleet.demo.seed") < DEMO_SEEDERS.index(
        "console.tuning.demo.seed"
    )
    ctx = SimpleNamespace(admin=admin_user)
    notes = seed(ctx)
    assert len(notes) == 2
    v1, v2 = TierConfigVersion.objects.filter(name="default").order_by("version")
    assert v1.config == seed_tiers
    assert v2.config["scheduler"]["queues"]["online"]["max_waiting_time_ms"] == 5
    assert v2.config["scheduler"]["adaptive"]["online_pressure_threshold"] == 5
    assert v2.message and v2.author == admin_user
    profile = LaunchProfileVersion.objects.get(name="demo-8b")
    assert (
        profile.version,
        profile.args["max_num_seqs"],
        profile.args["scheduling_policy"],
        profile.args["enable_prefix_caching"],
    ) == (1, 64, "priority", True)
    assert seed(ctx) == []
    assert TierConfigVersion.objects.count() == 2 and LaunchProfileVersion.objects.count() == 1


def test_the_demo_runs_the_seeder_and_its_nodes_want_v1(
    admin_user: Any, settings: Any, tmp_path: Any
) -> None:
    settings.DATA_DIR = tmp_path  # the fleet's seeder writes the nodes' tokens there
    run_seeders(SimpleNamespace(admin=admin_user))  # type: ignore[arg-type]
    v1, v2 = TierConfigVersion.objects.filter(name="default").order_by("version")
    nodes = Node.objects.filter(name__in=["demo-node-1", "demo-node-2"])
    assert sorted(n.desired_tier_config_id for n in nodes) == [v1.pk, v1.pk]  # v2 rolls out
    # A node that wants another version keeps it when the demo is seeded again.
    Node.objects.filter(name="demo-node-2").update(desired_tier_config=v2)
    notes = run_seeders(SimpleNamespace(admin=admin_user))  # type: ignore[arg-type]
    assert not [note for note in notes if "want" in note]
    assert Node.objects.get(name="demo-node-2").desired_tier_config_id == v2.pk


@pytest.mark.django_db
def test_the_openapi_schema_builds_without_warnings() -> None:
    out = io.StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    schema = out.getvalue()
    for route in ("/api/v1/tier-configs/{id}/diff/", "/api/v1/launch-profiles/{id}/kubernetes/"):
        assert route in schema
