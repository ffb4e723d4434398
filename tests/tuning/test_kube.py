"""The Kubernetes export parses and holds what seed 000's manifests hold, in the shape of
docker/k8s/base: the agent in front of vLLM, vLLM on localhost, tokens and cache mounted."""

from __future__ import annotations

from typing import Any

import yaml

from console.tuning.kube import (
    ENGINE_PORT,
    GATEWAY_PORT,
    KubeOptions,
    dns_name,
    engine_argv,
    render_yaml,
)
from console.tuning.vllm_args import render_argv, validate_args


def documents(args: dict[str, Any], **kwargs: Any) -> dict[str, dict[str, Any]]:
    text = render_yaml("Demo_8B", validate_args(args), version=4, **kwargs)
    docs = list(yaml.safe_load_all(text))
    return {doc["kind"]: doc for doc in docs}


def pod_of(args: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    return documents(args, **kwargs)["StatefulSet"]["spec"]["template"]  # type: ignore[no-any-return]


def without(argv: list[str], *flags: str) -> list[str]:
    """`argv` less each of `flags` and the value after it."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in flags:
            skip = True
        else:
            out.append(arg)
    return out


def containers(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in pod["spec"]["containers"]}


def test_it_is_four_documents_with_no_aliases(profile_args: dict[str, Any]) -> None:
    text = render_yaml("demo", validate_args(profile_args))
    assert "&id" not in text and "*id" not in text
    assert [d["kind"] for d in yaml.safe_load_all(text)] == [
        "PriorityClass",
        "StatefulSet",
        "Service",
        "HorizontalPodAutoscaler",
    ]


def test_vllm_runs_the_profile_on_localhost_on_gpus_it_requests_and_limits(
    profile_args: dict[str, Any],
) -> None:
    args = {**profile_args, "tensor_parallel_size": 2, "pipeline_parallel_size": 2, "port": 8100}
    vllm = containers(pod_of(args))["vllm"]
    argv = vllm["command"] + vllm["args"]
    assert argv == engine_argv(validate_args(args))
    # Everything the profile says, except where it listens: only the gateway reaches it.
    profile_argv = render_argv(validate_args(args))
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv[argv.index("--port") + 1] == str(ENGINE_PORT)
    assert without(argv, "--host", "--port") == without(profile_argv, "--port")
    assert "ports" not in vllm
    assert vllm["resources"]["requests"]["nvidia.com/gpu"] == "4"
    assert vllm["resources"]["limits"]["nvidia.com/gpu"] == "4"
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        command = vllm[probe]["exec"]["command"]
        assert f"http://127.0.0.1:{ENGINE_PORT}/health" in command[-1]


def test_the_agent_fronts_the_engine_and_the_service_targets_the_gateway(
    profile_args: dict[str, Any],
) -> None:
    docs = documents(profile_args)
    pod = docs["StatefulSet"]["spec"]["template"]
    agent = containers(pod)["agent"]
    start = agent["command"][-1]
    assert f"--engine-url http://127.0.0.1:{ENGINE_PORT}" in start
    assert f"--listen 0.0.0.0:{GATEWAY_PORT}" in start
    assert "/etc/tiergate/node-tokens/$POD_NAME" in start
    assert agent["ports"] == [{"name": "gateway", "containerPort": GATEWAY_PORT, "protocol": "TCP"}]
    for probe in ("livenessProbe", "readinessProbe"):
        assert agent[probe]["httpGet"] == {"path": "/health", "port": "gateway"}
    assert docs["Service"]["spec"]["ports"] == [
        {"name": "gateway", "port": GATEWAY_PORT, "targetPort": "gateway"}
    ]
    assert pod["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(GATEWAY_PORT),
        "prometheus.io/path": "/metrics",
    }


def test_tokens_and_the_model_cache_are_mounted(profile_args: dict[str, Any]) -> None:
    statefulset = documents(profile_args)["StatefulSet"]
    pod = statefulset["spec"]["template"]
    vllm = containers(pod)["vllm"]
    env = {e["name"]: e for e in vllm["env"]}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "huggingface",
        "key": "token",
        "optional": True,
    }
    assert env["HF_HOME"]["value"] == "/models"
    assert {"name": "model-cache", "mountPath": "/models"} in vllm["volumeMounts"]
    claim = statefulset["spec"]["volumeClaimTemplates"][0]
    assert claim["metadata"]["name"] == "model-cache"
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["node-tokens"]["secret"] == {"secretName": "tiergate-node-tokens"}


def test_images_are_pinned(profile_args: dict[str, Any]) -> None:
    for container in containers(pod_of(profile_args)).values():
        name, _, tag = container["image"].rpartition(":")
        assert name and tag and tag != "latest"


def test_one_gpu_when_the_profile_sets_none() -> None:
    vllm = containers(pod_of({"model": "m"}))["vllm"]
    assert vllm["resources"]["limits"] == {"nvidia.com/gpu": "1"}


def test_replicas_spread_one_per_node_with_a_user_priority_class(
    profile_args: dict[str, Any],
) -> None:
    docs = documents(profile_args)
    pod = docs["StatefulSet"]["spec"]["template"]
    assert pod["spec"]["priorityClassName"] == "inference-online"
    terms = pod["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms[0]["topologyKey"] == "kubernetes.io/hostname"
    assert terms[0]["labelSelector"]["matchLabels"] == {"app.kubernetes.io/name": "demo-8b"}
    selector = docs["StatefulSet"]["spec"]["selector"]["matchLabels"]
    assert selector == {"app.kubernetes.io/name": "demo-8b"}
    assert pod["metadata"]["labels"]["tiergate.io/profile-version"] == "4"
    pc = docs["PriorityClass"]
    assert pc["apiVersion"] == "scheduling.k8s.io/v1"
    assert pc["metadata"]["name"] == "inference-online"
    assert not pc["metadata"]["name"].startswith("system-")


def test_the_hpa_scales_on_the_online_queue_and_ttft_with_seed_windows(
    profile_args: dict[str, Any],
) -> None:
    hpa = documents(profile_args, options=KubeOptions(replicas=3, max_replicas=12))[
        "HorizontalPodAutoscaler"
    ]
    assert hpa["apiVersion"] == "autoscaling/v2"
    spec = hpa["spec"]
    assert spec["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "name": "demo-8b",
    }
    assert (spec["minReplicas"], spec["maxReplicas"]) == (3, 12)
    metrics = {m["pods"]["metric"]["name"]: m["pods"] for m in spec["metrics"]}
    assert set(metrics) == {"tiergate_queue_depth", "tiergate_ttft_seconds_p99"}
    assert all(m["type"] == "Pods" for m in spec["metrics"])
    for metric in metrics.values():
        assert metric["metric"]["selector"] == {"matchLabels": {"tier": "online"}}
    assert metrics["tiergate_queue_depth"]["target"] == {
        "type": "AverageValue",
        "averageValue": "10",
    }
    assert spec["behavior"]["scaleUp"]["stabilizationWindowSeconds"] == 30
    assert spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 300


def test_names_become_dns_labels() -> None:
    assert dns_name("Demo_8B") == "demo-8b"
    assert dns_name("__") == "vllm"
    assert len(dns_name("x" * 100)) == 63
