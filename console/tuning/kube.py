"""A launch profile as Kubernetes manifests (seed 000 section 3.3), pure and Django-free.

One multi-document YAML: a PriorityClass, the engine StatefulSet, its Service and an
autoscaling/v2 HorizontalPodAutoscaler. docker/k8s/base/engine.yaml is this module's output
for docker/k8s/base/engine-profile.json (`python -m console.tuning.kube`; a test keeps them
equal), so the page's YAML and the shipped manifests have one shape.

The engine pod is two containers: the Tiergate agent, whose gateway is the pod's only port
(the Service targets it), and vLLM, running the profile's exact argv but bound to localhost,
so no request can skip the gateway's queues. A StatefulSet, not a Deployment: every replica is
a node of its own to the console, with a node token of its own (the Secret holds one per pod
name) and a model cache volume of its own that survives restarts.

The HPA scales on the gateway's signals, per pod: the online tier's queue depth and its TTFT
P99. Both reach the HPA through prometheus-adapter (docker/k8s/base/prometheus-adapter.yaml):
`tiergate_queue_depth` as it is, `tiergate_ttft_seconds_p99` computed from the
`tiergate_ttft_seconds` histogram's buckets. Without an adapter the HPA cannot read them and
never scales (seed 000's "HPA does not scale"), which is also why the pods carry scrape
annotations.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from console.tuning.vllm_args import LaunchArgs, render_argv, validate_args

GATEWAY_PORT = 8080  # the agent's gateway: the pod's one served port
ENGINE_PORT = 8001  # vLLM, on 127.0.0.1 inside the pod
# Pinned: a moving tag would change the engine under a version that claims to be fixed.
VLLM_IMAGE = "vllm/vllm-openai:v0.11.0"
AGENT_IMAGE = "tiergate/console:0.1.0"
QUEUE_METRIC = "tiergate_queue_depth"
LATENCY_METRIC = "tiergate_ttft_seconds_p99"
MODEL_CACHE = "/models"  # HF_HOME: downloaded weights survive a restart


@dataclass(frozen=True)
class KubeOptions:
    namespace: str = "tiergate"
    image: str = VLLM_IMAGE
    agent_image: str = AGENT_IMAGE
    console_url: str = "http://tiergate-console:8000"
    replicas: int = 2
    max_replicas: int = 8
    # "system-" names are reserved for Kubernetes itself, so the seed's class is renamed.
    priority_class: str = "inference-online"
    priority_value: int = 100000
    # The tier whose signals the HPA follows (the seed's online pressure).
    tier: str = "online"
    # Scale up when more than this many requests wait in the tier's queue per pod.
    queue_target: int = 10
    # TTFT P99 per pod, as a Kubernetes quantity in seconds ("1200m" = 1.2 s).
    latency_target: str = "1200m"
    scale_up_window_s: int = 30
    scale_down_window_s: int = 300
    model_cache_size: str = "200Gi"


def dns_name(name: str) -> str:
    """A DNS-1123 label from a profile name (lowercase, '-' for anything else)."""
    label = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:63].strip("-")
    return label or "vllm"


def engine_argv(args: LaunchArgs) -> list[str]:
    """The profile's argv, bound to localhost on ENGINE_PORT: only the gateway reaches it."""
    return render_argv(args.model_copy(update={"host": "127.0.0.1", "port": ENGINE_PORT}))


def _http_check(port: int) -> list[str]:
    # vLLM binds 127.0.0.1, which the kubelet's httpGet (aimed at the pod IP) cannot reach, so
    # its probes run inside the container; the image has Python.
    return [
        "python3",
        "-c",
        "import urllib.request; "
        f"urllib.request.urlopen('http://127.0.0.1:{port}/health', timeout=4)",
    ]


def _vllm_container(args: LaunchArgs, opts: KubeOptions) -> dict[str, Any]:
    argv = engine_argv(args)
    gpus = str(args.gpus)
    check = {"exec": {"command": _http_check(ENGINE_PORT)}, "timeoutSeconds": 5}
    return {
        "name": "vllm",
        "image": opts.image,
        # command + args together are exactly the rendered argv, whatever the image's entrypoint.
        "command": argv[:2],
        "args": argv[2:],
        "env": [
            {"name": "HF_HOME", "value": MODEL_CACHE},
            {
                "name": "HF_TOKEN",
                "valueFrom": {
                    # Gated models need it; optional, so open models start without one.
                    "secretKeyRef": {"name": "huggingface", "key": "token", "optional": True}
                },
            },
        ],
        # A GPU is never overcommitted: requests equal limits (seed 000).
        "resources": {"requests": {"nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}},
        # Loading (or downloading) weights takes minutes: the startup probe allows 30 of them
        # before liveness takes over and restarts an engine that stops answering.
        "startupProbe": {**check, "periodSeconds": 10, "failureThreshold": 180},
        "readinessProbe": {**check, "periodSeconds": 10, "failureThreshold": 3},
        "livenessProbe": {**check, "periodSeconds": 30, "failureThreshold": 3},
        "volumeMounts": [
            {"name": "model-cache", "mountPath": MODEL_CACHE},
            {"name": "dshm", "mountPath": "/dev/shm"},
        ],
    }


def _agent_container(opts: KubeOptions) -> dict[str, Any]:
    probe = {"httpGet": {"path": "/health", "port": "gateway"}, "timeoutSeconds": 3}
    # Each replica is its own node: its token is the Secret's key named after the pod.
    start = (
        'TIERGATE_NODE_TOKEN="$(cat /etc/tiergate/node-tokens/$POD_NAME)" exec python -m gpu_agent'
        f" --engine-url http://127.0.0.1:{ENGINE_PORT} --listen 0.0.0.0:{GATEWAY_PORT}"
        f' --console "$TIERGATE_CONSOLE_URL" --advertise-url "http://$POD_IP:{GATEWAY_PORT}"'
        " --state-dir /var/lib/tiergate-agent"
    )
    field = {"POD_NAME": "metadata.name", "POD_IP": "status.podIP"}
    return {
        "name": "agent",
        "image": opts.agent_image,
        "command": ["sh", "-c", start],
        "env": [
            *({"name": k, "valueFrom": {"fieldRef": {"fieldPath": v}}} for k, v in field.items()),
            {"name": "TIERGATE_CONSOLE_URL", "value": opts.console_url},
        ],
        "ports": [{"name": "gateway", "containerPort": GATEWAY_PORT, "protocol": "TCP"}],
        "readinessProbe": {**probe, "periodSeconds": 5, "failureThreshold": 3},
        "livenessProbe": {**probe, "periodSeconds": 20, "failureThreshold": 3},
        "resources": {
            "requests": {"cpu": "1", "memory": "512Mi"},
            "limits": {"cpu": "2", "memory": "1Gi"},
        },
        "volumeMounts": [
            {"name": "node-tokens", "mountPath": "/etc/tiergate/node-tokens", "readOnly": True},
            {"name": "agent-state", "mountPath": "/var/lib/tiergate-agent"},
        ],
    }


def manifests(
    name: str, args: LaunchArgs, *, version: int | None = None, options: KubeOptions | None = None
) -> list[dict[str, Any]]:
    opts = options or KubeOptions()
    app = dns_name(name)
    selector = {"app.kubernetes.io/name": app}
    labels = {
        **selector,
        "app.kubernetes.io/component": "engine",
        "app.kubernetes.io/part-of": "tiergate",
    }
    pod_labels = dict(labels)
    if version is not None:
        pod_labels["tiergate.io/profile-version"] = str(version)
    meta = {"name": app, "namespace": opts.namespace, "labels": labels}

    priority_class = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": opts.priority_class},
        "value": opts.priority_value,
        "globalDefault": False,
        "description": "Online LLM inference: not preempted by batch workloads.",
    }
    anti_affinity = {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            # One replica per node: a node failing takes out one replica, and two replicas
            # never fight over one machine's GPUs.
            {"labelSelector": {"matchLabels": selector}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta,
        "spec": {
            "serviceName": app,
            "replicas": opts.replicas,
            # Replicas are independent nodes: start and replace them in parallel.
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {
                    "labels": pod_labels,
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(GATEWAY_PORT),
                        "prometheus.io/path": "/metrics",
                    },
                },
                "spec": {
                    "priorityClassName": opts.priority_class,
                    "affinity": {"podAntiAffinity": anti_affinity},
                    "terminationGracePeriodSeconds": 60,
                    "containers": [_agent_container(opts), _vllm_container(args, opts)],
                    "volumes": [
                        # Tensor parallel workers exchange tensors through shared memory.
                        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
                        {"name": "agent-state", "emptyDir": {}},
                        {"name": "node-tokens", "secret": {"secretName": "tiergate-node-tokens"}},
                    ],
                },
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "model-cache"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": opts.model_cache_size}},
                    },
                }
            ],
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "selector": selector,
            "ports": [{"name": "gateway", "port": GATEWAY_PORT, "targetPort": "gateway"}],
        },
    }
    tier = {"matchLabels": {"tier": opts.tier}}
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": meta,
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": app},
            "minReplicas": opts.replicas,
            "maxReplicas": max(opts.max_replicas, opts.replicas),
            "metrics": [
                _pods_metric(QUEUE_METRIC, tier, str(opts.queue_target)),
                _pods_metric(LATENCY_METRIC, tier, opts.latency_target),
            ],
            # Scale up fast, down slowly, so replica counts do not flap with traffic (seed 000).
            "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": opts.scale_up_window_s},
                "scaleDown": {"stabilizationWindowSeconds": opts.scale_down_window_s},
            },
        },
    }
    return [priority_class, statefulset, service, hpa]


def _pods_metric(name: str, selector: dict[str, Any], average: str) -> dict[str, Any]:
    return {
        "type": "Pods",
        "pods": {
            "metric": {"name": name, "selector": selector},
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


def main(argv: list[str]) -> int:
    """`python -m console.tuning.kube PROFILE.json NAME`: print the manifests of a profile file
    (snake_case vLLM args, as the API takes them)."""
    if len(argv) != 2:
        print("usage: python -m console.tuning.kube PROFILE.json NAME", file=sys.stderr)
        return 2
    args = validate_args(json.loads(Path(argv[0]).read_text()))
    sys.stdout.write(render_yaml(argv[1], args))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
