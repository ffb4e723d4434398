"""Every Kubernetes manifest the project ships or renders passes kubernetes-validate (its
bundled schemas, strict: no unknown field); the Prometheus Operator's kinds, which it has no
schema for, are checked against the objects they select."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from console.tuning.kube import KubeOptions, render_yaml
from console.tuning.vllm_args import validate_args

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
KUBERNETES_VERSION = "1.30.0"
OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule"}
# Not Kubernetes objects: kustomize's own files.
NOT_MANIFESTS = {"kustomization.yaml"}


def shipped() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    paths = [
        *sorted((DOCKER / "k8s").rglob("*.yaml")),
        DOCKER / "prometheus" / "prometheusrule.yaml",
    ]
    for path in paths:
        if path.name in NOT_MANIFESTS:
            continue
        for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
            docs.append((f"{path.relative_to(ROOT)}#{i}", doc))
    return docs


def rendered() -> list[tuple[str, dict[str, Any]]]:
    profiles: dict[str, dict[str, Any]] = {
        "minimal": {"model": "m"},
        "tp2-pp2": {
            "model": "meta-llama/Llama-3.1-70B-Instruct",
            "tensor_parallel_size": 2,
            "pipeline_parallel_size": 2,
            "port": 9000,
            "extra_args": ["--seed", "1"],
        },
    }
    docs = []
    for name, args in profiles.items():
        for options in (None, KubeOptions(namespace="inference", replicas=1, max_replicas=1)):
            text = render_yaml(name, validate_args(args), version=3, options=options)
            docs += [(f"kube.py {name} #{i}", d) for i, d in enumerate(yaml.safe_load_all(text))]
    return docs


@pytest.mark.parametrize(("where", "doc"), shipped() + rendered(), ids=lambda v: str(v)[:60])
def test_it_is_a_valid_kubernetes_object(where: str, doc: dict[str, Any]) -> None:
    if doc["kind"] in OPERATOR_KINDS:
        with pytest.raises(kubernetes_validate.SchemaNotFoundError):
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        return
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_base_ships_every_part() -> None:
    kinds = {(doc["kind"], doc["metadata"]["name"]) for _, doc in shipped()}
    for part in (
        ("Deployment", "tiergate-console"),
        ("Deployment", "tiergate-worker"),
        ("Deployment", "tiergate-beat"),
        ("StatefulSet", "tiergate-postgres"),
        ("Deployment", "tiergate-redis"),
        ("StatefulSet", "engine"),
        ("Service", "engine"),
        ("HorizontalPodAutoscaler", "engine"),
        ("PriorityClass", "inference-online"),
        ("ServiceMonitor", "tiergate-agent"),
        ("PrometheusRule", "tiergate"),
        ("ConfigMap", "prometheus-adapter"),
        ("Secret", "tiergate-node-tokens"),
        ("Secret", "huggingface"),
    ):
        assert part in kinds, part
    beat = next(d for _, d in shipped() if d["metadata"]["name"] == "tiergate-beat")
    assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"] == {"type": "Recreate"}


def test_the_service_monitor_selects_the_engine_service_and_its_gateway_port() -> None:
    docs = [d for _, d in shipped()]
    monitor = next(d for d in docs if d["kind"] == "ServiceMonitor")
    services = [d for d in docs if d["kind"] == "Service"]
    wanted = monitor["spec"]["selector"]["matchLabels"]
    selected = [s for s in services if wanted.items() <= s["metadata"]["labels"].items()]
    assert [s["metadata"]["name"] for s in selected] == ["engine"]
    ports = {p["name"] for p in selected[0]["spec"]["ports"]}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports


def test_a_bad_manifest_is_refused() -> None:
    doc = yaml.safe_load(render_yaml("m", validate_args({"model": "m"})).split("---")[-1])
    doc["spec"]["behavior"]["scaleUp"]["stabilisationWindowSeconds"] = 30
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
