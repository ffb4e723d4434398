"""Tier config and launch profile versions as Kubernetes ConfigMaps: the export the API and the
version pages offer, and the files the Git mirror (console.tuning.gitmirror) commits.

One ConfigMap per name, not per version (`tiergate-tier-config-<name>`): applying a newer
version replaces the older one, and in Git the history of one file is the history of the
name. The version number, author and message travel as labels and annotations.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import yaml

from console.tuning.kube import dns_name

if TYPE_CHECKING:
    from console.tuning.models import VersionedDocument

TIER_CONFIG = "tier-config"
LAUNCH_PROFILE = "launch-profile"
# kind -> the folder its files take in the Git mirror
FOLDERS = {TIER_CONFIG: "tier-configs", LAUNCH_PROFILE: "launch-profiles"}


def kind_of(obj: VersionedDocument) -> str:
    from console.tuning.models import TierConfigVersion

    return TIER_CONFIG if isinstance(obj, TierConfigVersion) else LAUNCH_PROFILE


def document_of(obj: VersionedDocument) -> dict[str, Any]:
    from console.tuning.models import LaunchProfileVersion, TierConfigVersion

    if isinstance(obj, TierConfigVersion):
        return obj.config  # type: ignore[no-any-return]
    assert isinstance(obj, LaunchProfileVersion)
    return obj.args  # type: ignore[no-any-return]


def configmap(obj: VersionedDocument, *, author: str = "", namespace: str = "") -> dict[str, Any]:
    from console.tuning.models import LaunchProfileVersion

    kind = kind_of(obj)
    data = {f"{kind}.json": json.dumps(document_of(obj), indent=2, sort_keys=True) + "\n"}
    if isinstance(obj, LaunchProfileVersion):
        data["command"] = obj.command + "\n"
    metadata: dict[str, Any] = {
        "name": f"tiergate-{kind}-{dns_name(obj.name)}"[:253],
        "labels": {
            "app.kubernetes.io/part-of": "tiergate",
            "tiergate.io/kind": kind,
            "tiergate.io/name": dns_name(obj.name),
            "tiergate.io/version": str(obj.version),
        },
        "annotations": {
            "tiergate.io/label": obj.label,
            "tiergate.io/message": obj.message,
            "tiergate.io/author": author or (obj.author.get_username() if obj.author else ""),
            "tiergate.io/created-at": obj.created_at.isoformat(),
        },
    }
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks, so a diff in Git shows the changed JSON lines."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def render_configmap(obj: VersionedDocument, *, author: str = "") -> str:
    return yaml.dump(configmap(obj, author=author), Dumper=_BlockDumper, sort_keys=False, width=100)


def mirror_path(obj: VersionedDocument) -> str:
    """Where the Git mirror keeps this name's ConfigMap."""
    # The name as it is (a slug: safe in a path), so "a_b" and "a-b" never share a file.
    return f"{FOLDERS[kind_of(obj)]}/{obj.name}.yaml"
