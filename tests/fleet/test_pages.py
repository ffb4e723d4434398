from __future__ import annotations

import json
import re
import time
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from console.fleet import services
from console.fleet.models import Endpoint, GatewayKey, Node
from tests.fleet.fleet_helpers import beat, post_beat, sample

pytestmark = pytest.mark.django_db


def browser(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_fleet_page_lists_nodes_with_live_status(
    viewer: Any, node_and_token: Any, tier_config: Any
) -> None:
    node, token = node_and_token
    services.set_desired([node], tier_config=tier_config)
    now = time.time()
    post_beat(
        Client(),
        token,
        beat(
            samples=[
                sample(now, online={"depth": 7, "in_flight": 2}, batch={"depth": 3, "in_flight": 0})
            ]
        ),
    )
    page = browser(viewer).get("/fleet/")
    html = page.content.decode()
    assert page.status_code == 200
    assert 'data-live-url="/fleet/live/"' in html
    assert "gpu-a-01" in html and "healthy" in html and "simulated" in html
    assert "online 7" in html and "batch 3" in html and "50%" in html and "25%" in html
    assert "drift" in html  # desired seed-000 v1, nothing applied yet
    assert re.search(r'<time datetime="\d{4}-\d\d-\d\dT', html)
    assert re.search(r"\b\d+ s ago", html)

    fragment = browser(viewer).get("/fleet/live/")
    assert fragment.status_code == 200 and "<html" not in fragment.content.decode()
    assert "gpu-a-01" in fragment.content.decode()


def test_a_silent_node_shows_stale(viewer: Any, node_and_token: Any) -> None:
    node, token = node_and_token
    post_beat(Client(), token, beat())
    Node.objects.filter(pk=node.pk).update(last_seen_at=timezone.now() - timedelta(seconds=11))
    assert "stale" in browser(viewer).get("/fleet/live/").content.decode()


def test_node_detail_draws_the_last_hour_with_local_plotly(
    viewer: Any, node_and_token: Any
) -> None:
    node, token = node_and_token
    now = time.time()
    post_beat(Client(), token, beat(samples=[sample(now - 5 + i) for i in range(5)]))
    page = browser(viewer).get(f"/fleet/nodes/{node.pk}/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "/static/vendor/plotly.min.js" in html and "cdn" not in html.lower()
    figure = json.loads(
        re.search(
            r'<script id="node-figure" type="application/json">(.*?)</script>', html, re.S
        ).group(1)
    )
    names = [trace["name"] for trace in figure["data"]]
    assert names == ["GPU util", "KV use", "online depth", "online TTFT P99"]
    assert len(figure["data"][0]["x"]) == 5
    assert figure["data"][3]["y"][0] == pytest.approx(310.0)
    assert "simulated" in figure["layout"]["annotations"][0]["text"]


def test_node_status_card_and_chart_refresh_from_their_own_urls(
    viewer: Any, outsider: Any, node_and_token: Any
) -> None:
    node, token = node_and_token
    page = browser(viewer).get(f"/fleet/nodes/{node.pk}/").content.decode()
    assert f'data-live-url="/fleet/nodes/{node.pk}/status/"' in page
    before = browser(viewer).get(f"/fleet/nodes/{node.pk}/status/")
    assert before.status_code == 200 and "never" in before.content.decode()
    assert "<html" not in before.content.decode()  # the card alone
    post_beat(Client(), token, beat(samples=[sample(time.time())]))
    after = browser(viewer).get(f"/fleet/nodes/{node.pk}/status/").content.decode()
    assert "never" not in after and "<time datetime=" in after
    figure = browser(viewer).get(f"/fleet/nodes/{node.pk}/figure/").json()
    assert [t["name"] for t in figure["data"]][:2] == ["GPU util", "KV use"]
    assert len(figure["data"][0]["x"]) == 1
    for path in ("status", "figure"):
        assert browser(outsider).get(f"/fleet/nodes/{node.pk}/{path}/").status_code == 403
        assert Client().get(f"/fleet/nodes/{node.pk}/{path}/").status_code == 302
        assert browser(viewer).get(f"/fleet/nodes/999999/{path}/").status_code == 404


def test_admin_creates_a_node_and_sees_the_token_once(admin_user: Any) -> None:
    client = browser(admin_user)
    assert client.get("/fleet/nodes/new/").status_code == 200
    r = client.post("/fleet/nodes/new/", {"name": "gpu-z-09", "labels": "h200, zone-b"})
    html = r.content.decode()
    token = re.search(r"(tgn_[A-Za-z0-9_-]{43})", html).group(1)
    assert "python -m gpu_agent --console http://testserver --node-token " + token in html
    assert Node.objects.get(name="gpu-z-09").labels == ["h200", "zone-b"]
    node = Node.objects.get(name="gpu-z-09")
    assert token not in client.get(f"/fleet/nodes/{node.pk}/").content.decode()
    # Rotate and delete, both behind a confirm on the page.
    detail = client.get(f"/fleet/nodes/{node.pk}/").content.decode()
    assert detail.count("data-confirm=") == 2
    new = re.search(
        r"(tgn_[A-Za-z0-9_-]{43})",
        client.post(f"/fleet/nodes/{node.pk}/rotate-token/").content.decode(),
    )
    assert new is not None and new.group(1) != token
    assert client.post(f"/fleet/nodes/{node.pk}/delete/").status_code == 302
    assert not Node.objects.filter(name="gpu-z-09").exists()


def test_viewers_and_operators_cannot_manage_nodes(
    viewer: Any, operator: Any, node_and_token: Any
) -> None:
    node, _ = node_and_token
    for user in (viewer, operator):
        client = browser(user)
        assert client.get("/fleet/nodes/new/").status_code == 403
        assert client.post(f"/fleet/nodes/{node.pk}/delete/").status_code == 403
        assert client.post(f"/fleet/nodes/{node.pk}/rotate-token/").status_code == 403
        assert "Add node" not in client.get("/fleet/").content.decode()
    assert Node.objects.filter(pk=node.pk).exists()


def test_pages_need_a_role(outsider: Any, db: None) -> None:
    assert browser(outsider).get("/fleet/").status_code == 403
    assert Client().get("/fleet/").status_code == 302


def test_endpoint_pages(admin_user: Any, viewer: Any) -> None:
    client = browser(admin_user)
    r = client.post(
        "/fleet/endpoints/new/",
        {
            "name": "local",
            "base_url": "http://vllm-0:8000/v1",
            "api_key": "sk-page-secret-9876",
            "kind": "vllm",
            "models": "a, b",
            "default_model": "a",
        },
    )
    assert r.status_code == 302
    endpoint = Endpoint.objects.get(name="local")
    assert endpoint.models == ["a", "b"] and endpoint.get_api_key() == "sk-page-secret-9876"
    html = browser(viewer).get(f"/fleet/endpoints/{endpoint.pk}/").content.decode()
    assert "sk-...9876" in html and "export LOCAL_BASE_URL=http://vllm-0:8000/v1" in html
    assert "Test connection" not in html  # viewers may not run it
    assert "local" in browser(viewer).get("/fleet/endpoints/").content.decode()
    # Editing without a key keeps the key.
    client.post(
        f"/fleet/endpoints/{endpoint.pk}/edit/",
        {
            "name": "local",
            "base_url": "http://vllm-1:8000/v1",
            "kind": "vllm",
            "models": "a",
            "default_model": "a",
        },
    )
    endpoint.refresh_from_db()
    assert (
        endpoint.base_url == "http://vllm-1:8000/v1"
        and endpoint.get_api_key() == "sk-page-secret-9876"
    )
    r = client.post("/fleet/endpoints/new/", {"name": "bad", "base_url": "ftp://x", "kind": "vllm"})
    assert r.status_code == 200 and "http:// or https://" in r.content.decode()


def test_endpoint_doctor_page_shows_steps_with_fixes(operator: Any, db: None) -> None:
    endpoint = services.create_endpoint(
        None, name="closed", base_url="http://127.0.0.1:9/v1", api_key="sk-x-000000"
    )
    html = browser(operator).post(f"/fleet/endpoints/{endpoint.pk}/doctor/").content.decode()
    assert "Connection test" in html and "refused" in html and "How to fix" in html


def test_env_import_page(admin_user: Any) -> None:
    r = browser(admin_user).post(
        "/fleet/endpoints/import/",
        {
            "text": (
                "export A_BASE_URL=http://a:8000/v1\n"
                "export A_API_KEY=sk-aaaa-1111\nexport A_MODEL=m\n"
            ),
            "kind": "external",
        },
    )
    assert r.status_code == 302
    assert Endpoint.objects.get(name="a").default_model == "m"
    r = browser(admin_user).post(
        "/fleet/endpoints/import/", {"text": "nothing here", "kind": "external"}
    )
    assert r.status_code == 200 and "no endpoint found" in r.content.decode()


def test_gateway_key_page_creates_shows_once_and_revokes(admin_user: Any, viewer: Any) -> None:
    client = browser(admin_user)
    r = client.post(
        "/fleet/keys/", {"name": "team-a", "tiers": "online, batch", "default_tier": "batch"}
    )
    key = re.search(r"(tgk_[A-Za-z0-9_-]{43})", r.content.decode()).group(1)
    assert key not in client.get("/fleet/keys/").content.decode()
    stored = GatewayKey.objects.get(name="team-a")
    assert browser(viewer).post(f"/fleet/keys/{stored.pk}/revoke/").status_code == 403
    assert client.post(f"/fleet/keys/{stored.pk}/revoke/").status_code == 302
    stored.refresh_from_db()
    assert stored.revoked_at is not None
    r = client.post("/fleet/keys/", {"name": "x", "tiers": "online", "default_tier": "offline"})
    assert "must be one of the key" in r.content.decode()


def test_admin_pages_render(superuser: Any, node_and_token: Any) -> None:
    client = browser(superuser)
    node, token = node_and_token
    post_beat(Client(), token, beat(listen_url="http://127.0.0.1:9101"))
    for path in [
        "/admin/fleet/node/",
        f"/admin/fleet/node/{node.pk}/change/",
        "/admin/fleet/endpoint/",
        "/admin/fleet/gatewaykey/",
        "/admin/fleet/telemetrysample/",
    ]:
        assert client.get(path).status_code == 200, path


def test_an_hour_of_samples_is_drawn_downsampled_keeping_the_spikes() -> None:
    from datetime import UTC, datetime

    from console.fleet.charts import MAX_POINTS, downsample

    start = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [
        (
            start + timedelta(seconds=i),
            0.5,
            None,
            {"online": {"depth": 1, "ttft_p99_s": 0.1}},
            "nvml",
        )
        for i in range(3600)
    ]
    rows[1234] = (rows[1234][0], 1.0, 0.4, {"online": {"depth": 9, "ttft_p99_s": 2.5}}, "nvml")
    drawn = downsample(rows)
    assert len(drawn) == MAX_POINTS and drawn[-1][0] == rows[-1][0]
    assert max(r[3]["online"]["ttft_p99_s"] for r in drawn) == 2.5  # the spike survives
    assert max(r[3]["online"]["depth"] for r in drawn) == 9
    assert sum(r[1] for r in drawn) / len(drawn) == pytest.approx(
        (0.5 * 3599 + 1.0) / 3600, rel=1e-3
    )
    assert [r[2] for r in drawn].count(None) == MAX_POINTS - 1
    assert downsample(rows[:10]) == rows[:10]


def test_an_endpoint_name_with_a_space_is_refused_everywhere(admin_user: Any) -> None:
    from console.fleet.models import Endpoint

    client = Client()
    client.force_login(admin_user)
    page = client.post(
        "/fleet/endpoints/new/",
        {"name": "my llm", "base_url": "http://127.0.0.1:9/v1", "kind": "external"},
    )
    assert page.status_code == 200 and "no spaces" in page.content.decode()
    api = client.post(
        "/api/v1/endpoints/",
        {"name": "my llm", "base_url": "http://127.0.0.1:9/v1", "kind": "external"},
        content_type="application/json",
    )
    assert api.status_code == 400 and "name" in api.json()
    with pytest.raises(services.FleetError, match=r"^'my llm': ") as refused:
        services.create_endpoint(admin_user, name="my llm", base_url="http://127.0.0.1:9/v1")
    assert refused.value.field == "name"
    assert not Endpoint.objects.filter(name__contains=" ").exists()


def test_a_base_url_without_v1_gets_a_hint(admin_user: Any) -> None:
    client = Client()
    client.force_login(admin_user)
    response = client.post(
        "/fleet/endpoints/new/",
        {"name": "no-v1", "base_url": "http://127.0.0.1:9", "kind": "external"},
        follow=True,
    )
    text = response.content.decode()
    assert "does not end in /v1" in text and "http://127.0.0.1:9/v1/" in text
    with_v1 = client.post(
        "/fleet/endpoints/new/",
        {"name": "with-v1", "base_url": "http://127.0.0.1:9/v1", "kind": "external"},
        follow=True,
    )
    assert "does not end in /v1" not in with_v1.content.decode()


def test_an_admin_edits_a_nodes_labels_on_its_page(admin_user: Any, operator: Any) -> None:
    from console.audit.models import AuditEvent

    node, _token = services.create_node("gpu-lbl", ["old"], None)
    client = Client()
    client.force_login(admin_user)
    assert 'id="node-labels"' in client.get(f"/fleet/nodes/{node.pk}/").content.decode()
    response = client.post(f"/fleet/nodes/{node.pk}/labels/", {"labels": "h200, zone-a"})
    assert response.status_code == 302
    node.refresh_from_db()
    assert node.labels == ["h200", "zone-a"]
    assert AuditEvent.objects.filter(object_type="fleet.node", action="update").exists()
    bad = client.post(f"/fleet/nodes/{node.pk}/labels/", {"labels": "ok, not ok!"}, follow=True)
    assert "not ok!" in bad.content.decode() and "Labels not saved" in bad.content.decode()
    node.refresh_from_db()
    assert node.labels == ["h200", "zone-a"]
    other = Client()
    other.force_login(operator)
    assert other.post(f"/fleet/nodes/{node.pk}/labels/", {"labels": "x"}).status_code == 403


def test_the_node_card_shows_the_agents_word_on_the_engines_cores(
    viewer: Any, node_and_token: Any
) -> None:
    node, token = node_and_token
    engine = beat()["engine"]
    warning = "VLLM_CPU_OMP_THREADS_BIND='0-3' leaves the agent none of its cores 0,1,2,3: <x>"
    post_beat(Client(), token, beat(engine={**engine, "cores_warning": warning}))
    card = browser(viewer).get(f"/fleet/nodes/{node.pk}/status/").content.decode()
    assert 'id="engine-cores-warning"' in card
    assert "none of its cores 0,1,2,3: &lt;x&gt;" in card  # escaped, as any agent text
    post_beat(Client(), token, beat(engine={**engine, "cores_warning": None}))
    card = browser(viewer).get(f"/fleet/nodes/{node.pk}/status/").content.decode()
    assert "engine-cores-warning" not in card
    too_long = post_beat(Client(), token, beat(engine={**engine, "cores_warning": "x" * 1001}))
    assert too_long.status_code == 400 and "cores_warning" in too_long.content.decode()
