"""Static checks of docker/ for a machine without a Docker engine (`make check-docker`).

It parses compose.yaml and checks that services reference defined images/builds, secrets and
volumes, that every COPY source in the Dockerfile exists, that the image runs as a non-root
user, and that every environment variable the compose file sets is one the settings read.
Prints one line per problem and exits 1 when there is any.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

DOCKER = Path(__file__).resolve().parent
ROOT = DOCKER.parent


def check_compose(problems: list[str]) -> None:
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
            if not source.startswith((".", "/")) and source not in volumes:
                problems.append(f"compose: service {name} uses undefined volume {source}")
        for dep in svc.get("depends_on", {}):
            if dep not in services:
                problems.append(f"compose: service {name} depends on unknown service {dep}")
        env = svc.get("environment", {}) or {}
        for var in env:
            base = var.removesuffix("_FILE")
            if name in {"console", "worker"} and f'"{base}"' not in settings_text:
                problems.append(
                    f"compose: service {name} sets {var}, which the settings never read"
                )
    for secret in compose.get("secrets", {}).values():
        if not str(secret.get("file", "")).startswith("./secrets/"):
            problems.append("compose: secrets must come from docker/secrets/ files")


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


def main() -> int:
    problems: list[str] = []
    check_compose(problems)
    check_dockerfile(problems)
    for problem in problems:
        print(problem)
    if not problems:
        print("docker/: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
