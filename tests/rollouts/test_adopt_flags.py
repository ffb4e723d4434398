"""A node's running engine flags saved as a launch profile in one click: the node then wants
that version, and its agent takes it as applied without restarting the engine."""

from __future__ import annotations

from html import unescape
from typing import Any

import httpx
from django.test import Client

from gpu_agent.sim.testing import free_port
from tests.waiting import wait_for


def engine_requests(port: int) -> int:
    reply = httpx.get(f"http://127.0.0.1:{port}/sim/v1/requests", timeout=5).json()
    return len(reply["data"])


def test_adopted_flags_become_the_applied_profile_without_a_restart(
    fleet: Any, operator: Any, api: Any
) -> None:
    from console.fleet.models import Node

    port = free_port()
    cmd = f"vllm serve demo --port {port} --sim-preset tiny-test --max-num-seqs 24"
    ((node, agent),) = fleet(1, engine_cmd=cmd)
    wait_for(lambda: Node.objects.get(pk=node.pk).engine.get("args"), what="the engine's args")
    body = {"model": "demo", "prompt": "hi", "max_tokens": 2}
    assert httpx.post(f"http://127.0.0.1:{port}/v1/completions", json=body, timeout=10).is_success
    assert engine_requests(port) == 1

    response = api(operator).post(
        "/api/v1/launch-profiles/adopt/", {"node": node.pk, "name": "adopted"}, format="json"
    )
    assert response.status_code == 201, response.content
    version = response.json()
    assert version["args"]["max_num_seqs"] == 24 and version["args"]["model"] == "demo"
    assert "port" not in version["args"] and "host" not in version["args"]
    wait_for(
        lambda: Node.objects.get(pk=node.pk).applied_launch_profile_id == version["id"],
        timeout=20,
        what="the adopted profile to be applied",
    )
    fresh = Node.objects.get(pk=node.pk)
    assert fresh.desired_launch_profile_id == version["id"] and not fresh.apply_errors
    assert engine_requests(port) == 1  # the same engine process: its history is still there
    assert agent.status()["engine"]["args"]["max_num_seqs"] == 24

    # The node page offers it, and the page's form does the same.
    page = Client()
    page.force_login(operator)
    html = unescape(page.get(f"/fleet/nodes/{node.pk}/").content.decode())
    assert 'id="adopt-flags"' in html and '"max_num_seqs": 24' in html
    saved = page.post(f"/tuning/nodes/{node.pk}/adopt-flags/", {"name": "adopted"})
    assert saved.status_code == 302 and "/tuning/launch-profiles/" in saved["Location"]


def test_a_node_without_running_flags_is_a_400_naming_the_node(
    transactional_db: None, operator: Any, api: Any
) -> None:
    from console.fleet import services

    node, _token = services.create_node("never-seen", [], None)
    response = api(operator).post(
        "/api/v1/launch-profiles/adopt/", {"node": node.pk, "name": "x"}, format="json"
    )
    assert response.status_code == 400 and "node" in response.json()
    bad_name = api(operator).post(
        "/api/v1/launch-profiles/adopt/", {"node": node.pk, "name": "no spaces"}, format="json"
    )
    assert bad_name.status_code == 400 and "name" in bad_name.json()


def test_viewers_cannot_adopt(transactional_db: None, viewer: Any, api: Any) -> None:
    from console.fleet import services

    node, _token = services.create_node("n1", [], None)
    response = api(viewer).post(
        "/api/v1/launch-profiles/adopt/", {"node": node.pk, "name": "x"}, format="json"
    )
    assert response.status_code == 403
