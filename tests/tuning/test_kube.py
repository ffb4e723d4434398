"""The Kubernetes export parses and holds what seed 000's manifests hold."""

from __future__ import annotations

from typing import Any

import yaml

from console.tuning.kube import KubeOptions, dns_name, render_yaml
from console.tuning.vllm_args import render_argv, validate_args


def documents(args: dict[str, Any], **kwargs: Any) -> dict[str, dict[str, Any]]:
    text = render_yaml("Demo_8B", validate_args(args), version=4, **kwargs)
    docs = list(yaml.safe_load_all(text))
    return {doc["kind"]: doc for doc in docs}


def test_it_is_four_documents_with_no_aliases(profile_args: dict[str, Any]) -> None:
    text = render_yaml("demo", validate_args(profile_args))
    assert "&id" not in text and "*id" not in text
    assert [d["kind"] for d in yaml.safe_load_all(text)] == [
        "PriorityClass",
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
    ]


def test_the_deployment_runs_the_exact_argv_on_gpus_it_requests_and_limits(
    profile_args: dict[str, Any],
) -> None:
    args = {**profile_args, "tensor_parallel_size": 2, "pipeline_parallel_size": 2, "port": 8100}
    deployment = documents(args)["Deployment"]
    pod = deployment["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert container["command"] + container["args"] == render_argv(validate_args(args))
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "4"
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert container["ports"][0]["containerPort"] == 8100
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}
    assert pod["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "8100",
        "prometheus.io/path": "/metrics",
    }
    assert pod["spec"]["priorityClassName"] == "inference-online"
    terms = pod["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert terms[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "demo-8b"
    }
    assert deployment["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "demo-8b"}
    assert pod["metadata"]["labels"]["tiergate.io/profile-version"] == "4"


def test_one_gpu_and_port_8000_when_the_profile_sets_neither() -> None:
    container = documents({"model": "m"})["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert container["ports"][0]["containerPort"] == 8000


def test_the_priority_class_exists_and_is_not_a_reserved_system_name(
    profile_args: dict[str, Any],
) -> None:
    pc = documents(profile_args)["PriorityClass"]
    assert pc["apiVersion"] == "scheduling.k8s.io/v1"
    assert pc["metadata"]["name"] == "inference-online" and not pc["metadata"]["name"].startswith(
        "system-"
    )


def test_the_hpa_scales_on_queue_length_and_latency_with_seed_windows(
    profile_args: dict[str, Any],
) -> None:
    hpa = documents(profile_args, options=KubeOptions(replicas=3, max_replicas=12))[
        "HorizontalPodAutoscaler"
    ]
    assert hpa["apiVersion"] == "autoscaling/v2"
    spec = hpa["spec"]
    assert spec["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "demo-8b",
    }
    assert (spec["minReplicas"], spec["maxReplicas"]) == (3, 12)
    metrics = {m["pods"]["metric"]["name"]: m for m in spec["metrics"]}
    assert set(metrics) == {"vllm:num_requests_waiting", "vllm:time_to_first_token_seconds_p99"}
    assert all(m["type"] == "Pods" for m in spec["metrics"])
    assert metrics["vllm:num_requests_waiting"]["pods"]["target"] == {
        "type": "AverageValue",
        "averageValue": "10",
    }
    assert spec["behavior"]["scaleUp"]["stabilizationWindowSeconds"] == 30
    assert spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 300


def test_names_become_dns_labels() -> None:
    assert dns_name("Demo_8B") == "demo-8b"
    assert dns_name("__") == "vllm"
    assert len(dns_name("x" * 100)) == 63
