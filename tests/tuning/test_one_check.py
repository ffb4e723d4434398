"""Every write path of a launch profile takes the one check (tuning.services.check_launch_args):
the API refuses in the engine's words what the form refuses, and so do sweeps and "save running
flags"; and saving flags a profile already holds makes no identical version (issue 58)."""

from __future__ import annotations

from typing import Any

import pytest

from console.fleet.models import Node
from console.tuning.models import LaunchProfileVersion
from tests.tuning.test_engine_check import SIM_REPORT, managed_node

BOGUS = {"model": "demo-8b", "extra_args": ["--bogus-flag", "3"]}


def test_the_api_refuses_what_the_form_refuses_in_the_engines_words(
    api: Any, operator: Any, admin_user: Any
) -> None:
    managed_node("gpu-a", SIM_REPORT, admin_user)
    response = api(operator).post(
        "/api/v1/launch-profiles/", {"name": "bad", "args": BOGUS}, format="json"
    )
    assert response.status_code == 400, response.content
    [message] = response.json()["args"]
    assert "on gpu-a refuses: unrecognized arguments: --bogus-flag 3" in message
    assert not LaunchProfileVersion.objects.exists()
    # The same engine takes a good profile.
    good = api(operator).post(
        "/api/v1/launch-profiles/",
        {"name": "good", "args": {"model": "demo-8b", "max_num_seqs": 8}},
        format="json",
    )
    assert good.status_code == 201, good.content


def test_code_that_creates_a_profile_gets_the_same_refusal(admin_user: Any) -> None:
    from console.tuning import services
    from console.tuning.vllm_args import ArgsError

    managed_node("gpu-a", SIM_REPORT, admin_user)
    with pytest.raises(ArgsError) as caught:
        services.create_launch_profile(name="bad", args=BOGUS, user=admin_user)
    assert "unrecognized arguments: --bogus-flag 3" in str(caught.value)
    assert not LaunchProfileVersion.objects.exists()


def test_a_launch_profile_sweep_value_the_engine_refuses_is_named_at_creation(
    api: Any, operator: Any, admin_user: Any
) -> None:
    from console.tuning import services

    # An engine whose parser has no --scheduling-policy (an older one): the built-in rules
    # allow the value, the node's engine does not.
    older = {
        **SIM_REPORT,
        "options": [
            o for o in SIM_REPORT["options"] if "--scheduling-policy" not in (o.get("flags") or [])
        ],
    }
    node = managed_node("gpu-a", older, admin_user)
    profile = services.create_launch_profile(
        name="engine", args={"model": "demo-8b", "max_num_seqs": 8}, user=admin_user
    )
    Node.objects.filter(pk=node.pk).update(desired_launch_profile=profile)
    response = api(operator).post(
        "/api/v1/sweeps/",
        {
            "node": node.pk,
            "endpoint": None,
            "kind": "launch_profile",
            "model": "demo-8b",
            "variables": [{"path": "scheduling_policy", "values": ["fcfs", "priority"]}],
            "preset": "smoke",
        },
        format="json",
    )
    assert response.status_code == 400, response.content
    body = response.json()
    assert "unrecognized arguments: --scheduling-policy fcfs" in str(
        body["variables[0].values[0]"]
    ), body


def _running(node: Node, **args: Any) -> None:
    Node.objects.filter(pk=node.pk).update(
        engine={"model": "demo-8b", "args": {"model": "demo-8b", **args}}
    )


def test_saving_flags_a_profile_already_holds_makes_no_new_version(
    api: Any, operator: Any, admin_user: Any
) -> None:
    node = managed_node("gpu-a", None, admin_user)
    _running(node, max_num_seqs=24)
    first = api(operator).post(
        "/api/v1/launch-profiles/adopt/", {"node": node.pk, "name": "adopted"}, format="json"
    )
    assert first.status_code == 201, first.content
    again = api(operator).post(
        "/api/v1/launch-profiles/adopt/", {"node": node.pk, "name": "adopted"}, format="json"
    )
    assert again.status_code == 200, again.content
    assert again.json()["id"] == first.json()["id"]
    assert LaunchProfileVersion.objects.filter(name="adopted").count() == 1

    # The page says so, and leads to the version that holds the flags.
    from django.test import Client

    page = Client()
    page.force_login(operator)
    response = page.post(f"/tuning/nodes/{node.pk}/adopt-flags/", {"name": "adopted"}, follow=True)
    assert "No change: adopted v1 already holds these flags" in response.content.decode()
    assert LaunchProfileVersion.objects.filter(name="adopted").count() == 1

    # Different flags do make the next version, made from the one the node wanted.
    _running(node, max_num_seqs=32)
    changed = api(operator).post(
        "/api/v1/launch-profiles/adopt/", {"node": node.pk, "name": "adopted"}, format="json"
    )
    assert changed.status_code == 201 and changed.json()["version"] == 2
    assert changed.json()["parent"] == first.json()["id"]


def test_the_api_tells_an_invalid_preset_which_ones_are_valid(
    api: Any, operator: Any, admin_user: Any
) -> None:
    from console.fleet.services import create_endpoint

    endpoint = create_endpoint(admin_user, name="e1", base_url="http://127.0.0.1:9/v1")
    response = api(operator).post(
        "/api/v1/benchmarks/", {"endpoint": endpoint.pk, "preset": "bogus"}, format="json"
    )
    assert response.status_code == 400
    [message] = response.json()["preset"]
    assert message.startswith('"bogus" is not a valid choice; one of: ')
    for valid in ("smoke", "mixed-tiers", "step-ladder", "custom"):
        assert valid in message
