"""Static checks of docker/ for a machine without a Docker engine (`make check-docker`).

- compose.yaml: services reference defined images/builds, secrets, volumes and services;
  every environment variable set on a console process is one the settings read; every file it
  mounts from docker/ exists;
- the Dockerfile: every COPY source exists, the image ends as a non-root user;
- every image (compose, Kubernetes) is pinned to a tag other than latest;
- every kustomization.yaml: its resources and generator files exist, and docker/k8s/base lists
  every manifest in its folder;
- generated files match their sources: docker/k8s/base/engine.yaml is console.tuning.kube's
  output for engine-profile.json, docker/prometheus/prometheusrule.yaml holds exactly the
  groups of docker/prometheus/rules/. `python docker/check.py --write` regenerates both.

Prints one line per problem and exits 1 when there is any. Kubernetes schemas are checked by
tests/production/test_manifests.py (kubernetes-validate), the rules by promtool.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

DOCKER = Path(__file__).resolve().parent
ROOT = DOCKER.parent
sys.path.insert(0, str(ROOT))

from console.tuning.kube import manifests, render_yaml  # noqa: E402
from console.tuning.vllm_args import validate_args  # noqa: E402

BASE = DOCKER / "k8s" / "base"
ENGINE_PROFILE = BASE / "engine-profile.json"
ENGINE_YAML = BASE / "engine.yaml"
ENGINE_NAME = "engine"
RULES = DOCKER / "prometheus" / "rules"
PROMETHEUS_RULE = DOCKER / "prometheus" / "prometheusrule.yaml"
# In docker/k8s/base but deliberately not applied (docs, examples).
NOT_RESOURCES = {"kustomization.yaml", "secrets.example.yaml"}
CONSOLE_SERVICES = {"console", "worker", "beat"}


def yaml_files(folder: Path) -> Iterator[Path]:
    for path in sorted(folder.rglob("*")):
        if path.suffix in {".yaml", ".yml"} and path.is_file():
            yield path


def check_compose(problems: list[str], compose: dict[str, Any] | None = None) -> None:
    if compose is None:
        compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = compose.get("services", {})
    secrets = set(compose.get("secrets", {}))
    volumes = set(compose.get("volumes", {}))
    settings_text = (ROOT / "console" / "settings.py").read_text()
    for name, svc in services.items():
        if "image" not in svc and "build" not in svc:
            problems.append(f"compose: service {name} has neither image nor build")
        for secret in svc.get("secrets", []):
            if secret not in secrets:
                problems.append(f"compose: service {name} uses undefined secret {secret}")
        for mount in svc.get("volumes", []):
            source = str(mount).split(":", 1)[0]
            if source.startswith("."):
                if not (DOCKER / source).exists():
                    problems.append(f"compose: service {name} mounts missing {source}")
            elif not source.startswith("/") and source not in volumes:
                problems.append(f"compose: service {name} uses undefined volume {source}")
        for dep in svc.get("depends_on", {}):
            if dep not in services:
                problems.append(f"compose: service {name} depends on unknown service {dep}")
        env = svc.get("environment", {}) or {}
        for var in env:
            base = var.removesuffix("_FILE")
            if name in CONSOLE_SERVICES and f'"{base}"' not in settings_text:
                problems.append(
                    f"compose: service {name} sets {var}, which the settings never read"
                )
        if "image" in svc:
            problems.extend(_unpinned(f"compose: service {name}", svc["image"]))
    for secret in compose.get("secrets", {}).values():
        if not str(secret.get("file", "")).startswith("./secrets/"):
            problems.append("compose: secrets must come from docker/secrets/ files")
    check_compose_links(problems, services)


def _hosts(text: str) -> list[str]:
    """Host names of http://HOST:PORT URLs and "HOST:PORT" targets in `text`."""
    return re.findall(r"(?:http://|[\"'\[ ])([a-z][a-z0-9-]*):\d+", text)


def check_compose_links(problems: list[str], services: dict[str, Any]) -> None:
    """What one service names another by must be a service: the agents' engines and console,
    Prometheus's scrape targets, Grafana's datasource."""
    for name, svc in services.items():
        command = " ".join(str(part) for part in svc.get("command", []) or [])
        for host in _hosts(command):
            if host not in services:
                problems.append(f"compose: service {name} names unknown service {host}")
    named = {
        "docker/prometheus/prometheus.yml": DOCKER / "prometheus" / "prometheus.yml",
        "docker/grafana datasource": DOCKER / "grafana" / "provisioning" / "datasources",
    }
    for where, path in named.items():
        files = sorted(path.glob("*.yml")) if path.is_dir() else [path]
        for file in files:
            for host in _hosts(file.read_text()):
                if host not in services:
                    problems.append(f"{where}: names {host}, which is not a compose service")
    for required in ("prometheus", "grafana", "flower", "beat"):
        if required not in services:
            problems.append(f"compose: no {required} service")
    if not any(n.startswith("agent") for n in services):
        problems.append("compose: no agent service")


def check_dockerfile(problems: list[str]) -> None:
    text = (DOCKER / "Dockerfile").read_text()
    for line in text.splitlines():
        match = re.match(r"COPY\s+(.+)\s+\S+$", line.strip())
        if match:
            for source in match.group(1).split():
                if not (ROOT / source).exists():
                    problems.append(f"Dockerfile: COPY source {source} does not exist")
    users = re.findall(r"^USER\s+(\S+)", text, re.MULTILINE)
    if not users or users[-1] in {"root", "0"}:
        problems.append("Dockerfile: the image must end as a non-root USER")
    if "FROM " not in text:
        problems.append("Dockerfile: no FROM line")


def _unpinned(where: str, image: str) -> list[str]:
    name = image.rsplit("/", 1)[-1]
    if "@sha256:" in image:
        return []
    if ":" not in name or name.endswith(":latest"):
        return [f"{where}: image {image} is not pinned to a tag other than latest"]
    return []


def _images(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "image" and isinstance(value, str):
                yield value
            else:
                yield from _images(value)
    elif isinstance(node, list):
        for item in node:
            yield from _images(item)


def check_kubernetes(problems: list[str]) -> None:
    for path in yaml_files(DOCKER / "k8s"):
        where = str(path.relative_to(ROOT))
        for doc in yaml.safe_load_all(path.read_text()):
            for image in _images(doc):
                problems.extend(_unpinned(where, image))
    for path in DOCKER.rglob("kustomization.yaml"):
        where = str(path.relative_to(ROOT))
        kustomization = yaml.safe_load(path.read_text())
        listed = [str(r) for r in kustomization.get("resources", [])]
        for generator in kustomization.get("configMapGenerator", []):
            listed += [str(f).split("=", 1)[-1] for f in generator.get("files", [])]
        for entry in listed:
            if not (path.parent / entry).exists():
                problems.append(f"{where}: {entry} does not exist")
    resources = set(yaml.safe_load((BASE / "kustomization.yaml").read_text())["resources"])
    for path in BASE.glob("*.yaml"):
        if path.name not in resources | NOT_RESOURCES:
            problems.append(f"docker/k8s/base: {path.name} is not in kustomization.yaml")


def engine_documents() -> list[dict[str, Any]]:
    args = validate_args(json.loads(ENGINE_PROFILE.read_text()))
    return manifests(ENGINE_NAME, args)


def prometheus_rule() -> dict[str, Any]:
    groups: list[Any] = []
    for path in sorted(RULES.glob("*.yml")):
        groups += yaml.safe_load(path.read_text())["groups"]
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "tiergate", "labels": {"app.kubernetes.io/part-of": "tiergate"}},
        "spec": {"groups": groups},
    }


def check_generated(problems: list[str]) -> None:
    if list(yaml.safe_load_all(ENGINE_YAML.read_text())) != engine_documents():
        problems.append(
            "docker/k8s/base/engine.yaml differs from console.tuning.kube's output for "
            "engine-profile.json; run: python docker/check.py --write"
        )
    if yaml.safe_load(PROMETHEUS_RULE.read_text()) != prometheus_rule():
        problems.append(
            "docker/prometheus/prometheusrule.yaml differs from docker/prometheus/rules/; "
            "run: python docker/check.py --write"
        )


def write_generated() -> None:
    args = validate_args(json.loads(ENGINE_PROFILE.read_text()))
    command = "python docker/check.py --write"
    ENGINE_YAML.write_text(
        f"# Generated by `{command}`; edit engine-profile.json.\n" + render_yaml(ENGINE_NAME, args)
    )
    PROMETHEUS_RULE.write_text(
        f"# Generated by `{command}` from rules/; edit those.\n"
        + yaml.safe_dump(prometheus_rule(), sort_keys=False, width=100)
    )


def main(argv: list[str]) -> int:
    if argv == ["--write"]:
        write_generated()
    elif argv:
        print("usage: python docker/check.py [--write]", file=sys.stderr)
        return 2
    problems: list[str] = []
    check_compose(problems)
    check_dockerfile(problems)
    check_kubernetes(problems)
    check_generated(problems)
    for problem in problems:
        print(problem)
    if not problems:
        print("docker/: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
