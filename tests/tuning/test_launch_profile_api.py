"""REST /api/v1/launch-profiles/: immutable versions, the rendered command, vLLM rules, YAML."""

from __future__ import annotations

import shlex
from typing import Any

import pytest
import yaml

from console.audit.models import AuditEvent
from console.tuning.kube import engine_argv
from console.tuning.models import LaunchProfileVersion
from console.tuning.vllm_args import validate_args

URL = "/api/v1/launch-profiles/"


def body(args: dict[str, Any], name: str = "llama", message: str = "first") -> dict[str, Any]:
    return {"name": name, "message": message, "args": args}


@pytest.mark.django_db
def test_anonymous_gets_401(api: Any, profile_args: dict[str, Any]) -> None:
    assert api(None).get(URL).status_code == 401
    assert api(None).post(URL, body(profile_args), format="json").status_code == 401


def test_a_viewer_reads_but_cannot_create(
    api: Any, viewer: Any, operator: Any, profile_args: dict[str, Any]
) -> None:
    created = api(operator).post(URL, body(profile_args), format="json").json()
    assert api(viewer).get(f"{URL}{created['id']}/").json()["args"] == profile_args
    assert api(viewer).post(URL, body(profile_args), format="json").status_code == 403
    assert LaunchProfileVersion.objects.count() == 1


@pytest.mark.parametrize("who", ["operator", "admin_user"])
def test_operators_and_admins_create_with_the_rendered_command(
    api: Any, request: Any, who: str, profile_args: dict[str, Any]
) -> None:
    user = request.getfixturevalue(who)
    response = api(user).post(URL, body(profile_args), format="json")
    assert response.status_code == 201, response.content
    data = response.json()
    assert (data["name"], data["version"], data["author"]) == ("llama", 1, user.username)
    assert data["args"] == profile_args
    assert data["command"] == (
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --served-model-name llama-8b "
        "--max-model-len 8192 --max-num-seqs 64 --max-num-batched-tokens 16384 "
        "--scheduling-policy priority --enable-prefix-caching"
    )
    assert shlex.split(data["command"]) == data["argv"]
    again = api(user).post(URL, body({**profile_args, "max_num_seqs": 128}), format="json").json()
    assert again["version"] == 2


def test_the_command_is_read_only(api: Any, operator: Any, profile_args: dict[str, Any]) -> None:
    data = (
        api(operator).post(URL, {**body(profile_args), "command": "rm -rf /"}, format="json").json()
    )
    assert data["command"].startswith("vllm serve ")


def test_null_arguments_are_dropped_not_stored(api: Any, operator: Any) -> None:
    data = api(operator).post(URL, body({"model": "m", "port": None}), format="json").json()
    assert data["args"] == {"model": "m"}


@pytest.mark.parametrize("method", ["put", "patch", "delete"])
def test_versions_are_immutable_405(
    api: Any, operator: Any, method: str, profile_args: dict[str, Any]
) -> None:
    obj = api(operator).post(URL, body(profile_args), format="json").json()
    response = getattr(api(operator), method)(
        f"{URL}{obj['id']}/", body({"model": "x"}), format="json"
    )
    assert response.status_code == 405
    assert LaunchProfileVersion.objects.get().args == profile_args


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            {"max_model_len": 32768},
            "max_num_batched_tokens: (16384) is smaller than max_model_len (32768)",
        ),
        (
            {"max_num_seqs": 20000, "enable_chunked_prefill": True},
            "max_num_batched_tokens: (16384) must be greater than or equal to max_num_seqs",
        ),
        (
            {"extra_args": ["--scheduler-policy", "priority"]},
            "extra_args.0: --scheduler-policy is not a vLLM flag; use --scheduling-policy",
        ),
        ({"extra_args": ["--disable-log-requests"]}, "--enable-log-requests"),
        ({"gpu_memory_utilization": 1.2}, "gpu_memory_utilization: must be in (0, 1]"),
        ({"block_size": 12}, "block_size:"),
        ({"model": ""}, "model:"),
    ],
)
def test_vllm_rules_give_400_naming_the_field(
    api: Any, operator: Any, profile_args: dict[str, Any], args: dict[str, Any], words: str
) -> None:
    response = api(operator).post(URL, body({**profile_args, **args}), format="json")
    assert response.status_code == 400
    assert any(words in e for e in response.json()["args"]), response.json()
    assert not LaunchProfileVersion.objects.exists()
    assert not AuditEvent.objects.exists()


def test_creating_writes_an_audit_row_with_the_args(
    api: Any, admin_user: Any, profile_args: dict[str, Any]
) -> None:
    data = api(admin_user).post(URL, body(profile_args), format="json").json()
    event = AuditEvent.objects.get()
    assert (event.action, event.actor, event.object_type, event.object_id) == (
        "create",
        admin_user,
        "tuning.launchprofileversion",
        str(data["id"]),
    )
    assert event.after["args"] == profile_args


def test_diff_between_versions(api: Any, operator: Any, profile_args: dict[str, Any]) -> None:
    client = api(operator)
    client.post(URL, body(profile_args), format="json")
    v2 = client.post(
        URL,
        body({**profile_args, "max_num_seqs": 128, "enable_prefix_caching": None}),
        format="json",
    ).json()
    changes = client.get(f"{URL}{v2['id']}/diff/").json()["changes"]
    assert changes == [
        {"path": "max_num_seqs", "old": 64, "new": 128, "kind": "changed"},
        {"path": "enable_prefix_caching", "old": True, "new": None, "kind": "removed"},
    ]


def test_kubernetes_yaml_from_the_api(
    api: Any, operator: Any, viewer: Any, profile_args: dict[str, Any]
) -> None:
    obj = (
        api(operator)
        .post(URL, body({**profile_args, "tensor_parallel_size": 2}), format="json")
        .json()
    )
    response = api(viewer).get(f"{URL}{obj['id']}/kubernetes/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/yaml")
    docs = {d["kind"]: d for d in yaml.safe_load_all(response.content.decode())}
    containers = docs["StatefulSet"]["spec"]["template"]["spec"]["containers"]
    container = next(c for c in containers if c["name"] == "vllm")
    # The profile's argv, bound to localhost behind the agent's gateway.
    assert container["command"] + container["args"] == engine_argv(
        validate_args({**profile_args, "tensor_parallel_size": 2})
    )
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert (
        docs["HorizontalPodAutoscaler"]["spec"]["behavior"]["scaleDown"][
            "stabilizationWindowSeconds"
        ]
        == 300
    )
    assert api(None).get(f"{URL}{obj['id']}/kubernetes/").status_code == 401
    assert api(viewer).get(f"{URL}99999/kubernetes/").status_code == 404
