"""Tier configs and launch profiles export as Kubernetes ConfigMaps: API action and page link."""

from __future__ import annotations

import json
from typing import Any

import kubernetes_validate
import yaml
from django.test import Client

from console.tuning import services

KUBERNETES_VERSION = "1.30.0"


def test_a_tier_config_exports_as_a_valid_configmap(
    api: Any, operator: Any, viewer: Any, seed_tiers: dict[str, Any]
) -> None:
    obj = services.create_tier_config(name="prod_A", config=seed_tiers, message="m1", user=operator)
    obj = services.create_tier_config(
        name="prod_A", config=seed_tiers, message="why", user=operator
    )
    response = api(viewer).get(f"/api/v1/tier-configs/{obj.pk}/configmap/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/yaml")
    doc = yaml.safe_load(response.content)
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    assert doc["metadata"]["name"] == "tiergate-tier-config-prod-a"
    assert doc["metadata"]["labels"]["tiergate.io/version"] == "2"
    assert doc["metadata"]["annotations"]["tiergate.io/message"] == "why"
    assert doc["metadata"]["annotations"]["tiergate.io/author"] == "otto"
    assert json.loads(doc["data"]["tier-config.json"]) == obj.config
    assert api(None).get(f"/api/v1/tier-configs/{obj.pk}/configmap/").status_code == 401
    assert api(viewer).get("/api/v1/tier-configs/99999/configmap/").status_code == 404


def test_a_launch_profile_configmap_carries_its_command(
    api: Any, operator: Any, viewer: Any, profile_args: dict[str, Any]
) -> None:
    obj = services.create_launch_profile(name="llama", args=profile_args, user=operator)
    doc = yaml.safe_load(api(viewer).get(f"/api/v1/launch-profiles/{obj.pk}/configmap/").content)
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    assert json.loads(doc["data"]["launch-profile.json"]) == profile_args
    assert doc["data"]["command"] == obj.command + "\n"


def test_the_version_page_links_the_configmap_download(
    operator: Any, viewer: Any, seed_tiers: dict[str, Any]
) -> None:
    obj = services.create_tier_config(name="prod", config=seed_tiers, user=operator)
    client = Client()
    client.force_login(viewer)
    page = client.get(f"/tuning/tier-configs/{obj.pk}/").content.decode()
    link = f'id="download-configmap" href="/tuning/tier-configs/{obj.pk}/configmap/"'
    assert link in page
    response = client.get(f"/tuning/tier-configs/{obj.pk}/configmap/")
    assert response["Content-Disposition"] == 'attachment; filename="prod-v1-configmap.yaml"'
    assert yaml.safe_load(response.content)["kind"] == "ConfigMap"
    assert Client().get(f"/tuning/tier-configs/{obj.pk}/configmap/").status_code == 302
