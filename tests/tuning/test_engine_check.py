"""Launch profiles checked against the nodes' own engines: the console rebuilds each node's
reported argument parser (console/tuning/engine_check.py) and refuses, in the form and before
a rollout, what the node's engine would refuse, in the engine's words. Here the engine is the
simulator, whose parser takes vLLM's flags; tests/vllm runs the same against vLLM's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from console.fleet.choices import NodeMode
from console.fleet.models import Node
from console.fleet.services import create_node
from console.tuning import services
from console.tuning.engine_check import check_on_nodes, refusal
from console.tuning.models import LaunchProfileVersion
from console.tuning.rollouts.services import RolloutError, create_rollout
from console.tuning.vllm_args import validate_args
from gpu_agent.engine_probe import check, describe
from tests.fleet.fleet_helpers import beat, post_beat

SIM_REPORT = {**describe("sim"), "python": "/usr/bin/python3", "digest": "d1"}
ARGVS = [
    ["m", "--max-num-seqs", "8", "--scheduling-policy", "priority"],
    ["m", "--turbo-mode"],
    ["m", "--max-num-seqs", "eight"],
    ["m", "--scheduling-policy", "lifo"],
    ["m", "--gpu-memory-utilization", "x"],
    ["m", "--block-size", "7"],
    ["m", "--max-num-seqs"],
    ["m", "--enable-prefix-caching=yes"],
    ["m", "--no-enable-prefix-caching", "--max_num_seqs", "4"],
    ["m", "--scheduler-policy", "priority"],
    ["m", "--max-num-s", "4"],  # argparse's abbreviations, as the engine's parser allows them
]


@pytest.mark.parametrize("args", ARGVS, ids=lambda a: " ".join(a[1:]))
def test_the_rebuilt_parser_says_what_the_engine_parser_says(args: list[str]) -> None:
    assert refusal(SIM_REPORT, ["vllm", "serve", *args]) == check("sim", args)["error"]


def managed_node(name: str, report: dict[str, Any] | None, user: Any) -> Node:
    node, _ = create_node(name, [], user)
    Node.objects.filter(pk=node.pk).update(mode=NodeMode.MANAGED, engine_report=report or {})
    node.refresh_from_db()
    return node


def test_a_profile_is_checked_against_every_reporting_node(admin_user: Any) -> None:
    nodes = [managed_node("a", SIM_REPORT, admin_user), managed_node("b", None, admin_user)]
    args = validate_args({"model": "m", "extra_args": ["--turbo-mode"]})
    result = check_on_nodes(args, nodes)
    assert [str(e) for e in result.errors] == [
        f"extra_args: the simulator ({SIM_REPORT['version']}) on a refuses: "
        "unrecognized arguments: --turbo-mode"
    ]
    assert result.checked == ["a"] and result.unchecked == ["b"]
    ok = check_on_nodes(validate_args({"model": "m", "max_num_seqs": 4}), nodes)
    assert ok.errors == []


def test_the_form_refuses_what_a_node_engine_refuses_and_says_which_nodes_were_not_checked(
    operator: Any, admin_user: Any
) -> None:
    managed_node("gpu-a", SIM_REPORT, admin_user)
    managed_node("gpu-b", None, admin_user)
    client = Client()
    client.force_login(operator)
    page = client.get("/tuning/launch-profiles/new/").content.decode()
    note = page[page.index('id="engine-check"') :]
    note = note[: note.index("</p>")]
    assert "gpu-a (the simulator" in note
    assert "No engine report from gpu-b: checked with the built-in rules only" in note

    args = {"model": "m", "extra_args": ["--turbo-mode"]}
    response = client.post(
        "/tuning/launch-profiles/new/", {"name": "turbo", "message": "", "args": json.dumps(args)}
    )
    assert response.status_code == 200
    html = response.content.decode()
    errors = html[html.index('id="errors-args"') :]
    errors = errors[: errors.index("</ul>")]
    assert "on gpu-a refuses: unrecognized arguments: --turbo-mode" in errors
    assert not LaunchProfileVersion.objects.exists()

    good = {"model": "m", "max_num_seqs": 4}
    response = client.post(
        "/tuning/launch-profiles/new/", {"name": "ok", "message": "", "args": json.dumps(good)}
    )
    assert response.status_code == 302


def test_a_rollout_does_not_start_with_a_profile_a_target_engine_refuses(
    operator: Any, admin_user: Any
) -> None:
    node = managed_node("gpu-a", None, admin_user)
    # Created while no node reported (the built-in rules allow it), refused once one does.
    profile = services.create_launch_profile(
        name="turbo", args={"model": "m", "extra_args": ["--turbo-mode"]}, user=operator
    )
    Node.objects.filter(pk=node.pk).update(engine_report=SIM_REPORT)
    with pytest.raises(RolloutError) as caught:
        create_rollout(launch_profile=profile, user=operator, start=False, stale_targets="include")
    assert caught.value.field == "launch_profile"
    assert "unrecognized arguments: --turbo-mode" in caught.value.message


def test_the_heartbeat_stores_the_report_and_echoes_its_digest(admin_user: Any) -> None:
    node, token = create_node("gpu-a", [], admin_user)
    client = Client()
    body = beat(mode="managed")
    body["engine"] = {**body["engine"], "report_digest": "d1", "report": SIM_REPORT}
    reply = post_beat(client, token, body).json()
    assert reply["engine_report_digest"] == "d1"
    node.refresh_from_db()
    assert node.engine_report["version"] == SIM_REPORT["version"]
    assert "report" not in node.engine
    assert node.engine["report_digest"] == "d1"
    # Later beats carry the digest alone; the report stays.
    body["engine"] = {k: v for k, v in body["engine"].items() if k != "report"}
    assert post_beat(client, token, body).json()["engine_report_digest"] == "d1"
    node.refresh_from_db()
    assert node.engine_report["digest"] == "d1"
    # A report that does not fit the format is a 400 naming the field.
    body["engine"]["report"] = {**SIM_REPORT, "options": [{"kind": "weird"}]}
    response = post_beat(client, token, body)
    assert response.status_code == 400
    assert "engine.report.options.0.kind" in response.content.decode()
