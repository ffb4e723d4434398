"""A launch profile as Kubernetes manifests (seed 000 section 3.3), pure and Django-free.

One multi-document YAML: a PriorityClass, the Deployment running the exact `vllm serve` argv,
a Service, and an autoscaling/v2 HorizontalPodAutoscaler on queue length and TTFT.

The HPA's Pods metrics come from the Prometheus adapter (or any custom-metrics API server)
exposing them per pod; without one the HPA cannot read them and never scales, seed 000's "HPA
does not scale" failure, which is why the pods carry the scrape annotations. The queue metric
is vLLM's own gauge. vLLM exports TTFT only as a histogram, so the latency metric is a name the
adapter must compute from the histogram's buckets: a `rules` entry whose seriesQuery selects
`vllm:time_to_first_token_seconds_bucket` per namespace and pod, whose name maps `^(.*)_bucket$`
to `${1}_p99`, and whose metricsQuery is a `histogram_quantile(0.99, ...)` over the rate of
those buckets, summed by `le` and the pod.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from console.tuning.vllm_args import LaunchArgs, render_argv

DEFAULT_PORT = 8000  # vLLM's default when the profile sets none
QUEUE_METRIC = "vllm:num_requests_waiting"
LATENCY_METRIC = "vllm:time_to_first_token_seconds_p99"


@dataclass(frozen=True)
class KubeOptions:
    namespace: str = "ai-inference"
    image: str = "vllm/vllm-openai:latest"
    replicas: int = 2
    max_replicas: int = 8
    # "system-" names are reserved for Kubernetes itself, so the seed's class is renamed.
    priority_class: str = "inference-online"
    priority_value: int = 100000
    # Scale up when more than this many requests wait per pod (seed 000's online pressure).
    queue_target: int = 10
    # TTFT P99 per pod, as a Kubernetes quantity in seconds ("1200m" = 1.2 s).
    latency_target: str = "1200m"
    scale_up_window_s: int = 30
    scale_down_window_s: int = 300


def dns_name(name: str) -> str:
    """A DNS-1123 label from a profile name (lowercase, '-' for anything else)."""
    label = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:63].strip("-")
    return label or "vllm"


def manifests(
    name: str, args: LaunchArgs, *, version: int | None = None, options: KubeOptions | None = None
) -> list[dict[str, Any]]:
    opts = options or KubeOptions()
    app = dns_name(name)
    port = args.port or DEFAULT_PORT
    gpus = str(args.gpus)
    labels = {"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "tiergate"}
    pod_labels = dict(labels)
    if version is not None:
        pod_labels["tiergate.io/profile-version"] = str(version)
    argv = render_argv(args)
    meta = {"name": app, "namespace": opts.namespace, "labels": labels}

    priority_class = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": opts.priority_class},
        "value": opts.priority_value,
        "globalDefault": False,
        "description": "Online LLM inference: not preempted by batch workloads.",
    }
    probe = {"httpGet": {"path": "/health", "port": "http"}}
    container = {
        "name": "vllm",
        "image": opts.image,
        # command + args together are exactly the rendered argv, whatever the image's entrypoint.
        "command": argv[:2],
        "args": argv[2:],
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        # A GPU is never overcommitted: requests equal limits (seed 000).
        "resources": {"requests": {"nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}},
        # Loading weights takes a while: readiness gates traffic, liveness restarts a hung engine.
        "readinessProbe": {
            **probe,
            "initialDelaySeconds": 60,
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            **probe,
            "initialDelaySeconds": 90,
            "periodSeconds": 30,
            "failureThreshold": 3,
        },
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": opts.replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/name": app}},
            "template": {
                "metadata": {
                    "labels": pod_labels,
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(port),
                        "prometheus.io/path": "/metrics",
                    },
                },
                "spec": {
                    "priorityClassName": opts.priority_class,
                    # Spread replicas over nodes so one node failing takes out one replica.
                    "affinity": {
                        "podAntiAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 100,
                                    "podAffinityTerm": {
                                        "labelSelector": {
                                            "matchLabels": {"app.kubernetes.io/name": app}
                                        },
                                        "topologyKey": "kubernetes.io/hostname",
                                    },
                                }
                            ]
                        }
                    },
                    "containers": [container],
                    # Tensor parallel workers exchange tensors through shared memory.
                    "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "selector": {"app.kubernetes.io/name": app},
            "ports": [{"name": "http", "port": port, "targetPort": "http"}],
        },
    }
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": meta,
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": app},
            "minReplicas": opts.replicas,
            "maxReplicas": max(opts.max_replicas, opts.replicas),
            "metrics": [
                _pods_metric(QUEUE_METRIC, str(opts.queue_target)),
                _pods_metric(LATENCY_METRIC, opts.latency_target),
            ],
            # Scale up fast, down slowly, so replica counts do not flap with traffic (seed 000).
            "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": opts.scale_up_window_s},
                "scaleDown": {"stabilizationWindowSeconds": opts.scale_down_window_s},
            },
        },
    }
    return [priority_class, deployment, service, hpa]


def _pods_metric(name: str, average: str) -> dict[str, Any]:
    return {
        "type": "Pods",
        "pods": {
            "metric": {"name": name},
            "target": {"type": "AverageValue", "averageValue": average},
        },
    }


class _PlainDumper(yaml.SafeDumper):
    """Writes shared sub-objects out in full: no &anchors / *aliases an operator must chase."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render_yaml(
    name: str, args: LaunchArgs, *, version: int | None = None, options: KubeOptions | None = None
) -> str:
    header = (
        f"# Tiergate launch profile {name}" + (f" v{version}" if version is not None else "") + "\n"
    )
    docs = manifests(name, args, version=version, options=options)
    return header + yaml.dump_all(
        docs, Dumper=_PlainDumper, sort_keys=False, default_flow_style=False
    )
