"""An endpoint knows its models without "Fetch models": a node's gateway endpoint takes the model
its engine reports, and the connection doctor keeps the models it finds; one key reads the same
on every page (issue 58)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape
from typing import Any

import pytest
from django.test import Client

from console.fleet import doctor
from tests.fleet.fake_upstream import GOOD_KEY, MODELS, serve
from tests.fleet.fleet_helpers import beat, post_beat


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    yield from serve()


def _engine(model: str | None) -> dict[str, Any]:
    return {"url": "http://127.0.0.1:8001", "model": model, "simulated": True, "args": {}}


def test_a_gateway_endpoint_takes_the_model_its_engine_serves(node_and_token: Any) -> None:
    from console.fleet.models import Endpoint

    node, token = node_and_token
    # The first beat: the gateway listens, the engine is still starting (no model yet).
    post_beat(Client(), token, beat(listen_url="http://127.0.0.1:9101", engine=_engine(None)))
    endpoint = Endpoint.objects.get(node=node)
    assert endpoint.models == [] and endpoint.default_model == ""
    post_beat(Client(), token, beat(listen_url="http://127.0.0.1:9101", engine=_engine("demo-8b")))
    endpoint.refresh_from_db()
    assert endpoint.models == ["demo-8b"] and endpoint.default_model == "demo-8b"
    # A restart with another model: the new one first and default, the old one gone.
    post_beat(Client(), token, beat(listen_url="http://127.0.0.1:9101", engine=_engine("demo-70b")))
    endpoint.refresh_from_db()
    assert endpoint.models == ["demo-70b"] and endpoint.default_model == "demo-70b"


def test_a_gateway_endpoint_made_when_the_model_is_known_has_it(node_and_token: Any) -> None:
    from console.fleet.models import Endpoint

    node, token = node_and_token
    post_beat(Client(), token, beat(listen_url="http://127.0.0.1:9101"))  # engine: demo-8b
    endpoint = Endpoint.objects.get(node=node)
    assert endpoint.models == ["demo-8b"] and endpoint.default_model == "demo-8b"


def test_the_doctor_keeps_the_models_it_finds(upstream: str, admin_user: Any) -> None:
    from console.fleet.models import Endpoint
    from console.fleet.services import create_endpoint

    endpoint = create_endpoint(
        admin_user, name="fake", base_url=f"{upstream}/good/v1", api_key=GOOD_KEY
    )
    client = Client()
    client.force_login(admin_user)
    page = client.post(f"/fleet/endpoints/{endpoint.pk}/doctor/").content.decode()
    assert f"{upstream}/good/v1/models answers (2 models)." in unescape(page)
    stored = Endpoint.objects.get(pk=endpoint.pk)
    assert stored.models == MODELS and stored.default_model == MODELS[0]
    # The API's doctor keeps them too (here: nothing changed, nothing written again).
    from console.audit.models import AuditEvent

    updates = AuditEvent.objects.filter(object_type="fleet.endpoint", action="update").count()
    assert client.post(f"/api/v1/endpoints/{endpoint.pk}/doctor/").status_code == 200
    assert (
        AuditEvent.objects.filter(object_type="fleet.endpoint", action="update").count() == updates
    )


def test_one_model_is_one_model() -> None:
    reply = doctor.Reply(url="http://h/v1/models", status=200, body='{"data": [{"id": "demo-8b"}]}')
    step, _base, ids = doctor.choose_base("http://h/v1", [reply])
    assert step.detail == "http://h/v1/models answers (1 model)." and ids == ["demo-8b"]
    assert doctor.models_step(ids, "").detail == "1 model listed: demo-8b."
    assert doctor.models_step(["a", "b"], "").detail == "2 models listed: a, b."


def test_a_key_is_masked_alike_on_the_endpoint_and_the_gateway_keys_pages(
    node_and_token: Any, admin_user: Any
) -> None:
    from console.fleet.models import Endpoint, GatewayKey

    node, token = node_and_token
    post_beat(Client(), token, beat(listen_url="http://127.0.0.1:9101"))
    endpoint = Endpoint.objects.get(node=node)
    plaintext = endpoint.get_api_key()
    expected = f"tgk_...{plaintext[-4:]}"
    client = Client()
    client.force_login(admin_user)
    pages = {
        "endpoint": client.get(f"/fleet/endpoints/{endpoint.pk}/").content.decode(),
        "keys": client.get("/fleet/keys/").content.decode(),
        "node": client.get(f"/fleet/nodes/{node.pk}/").content.decode(),
    }
    for name, html in pages.items():
        shown = re.findall(r"<code>(tgk_[^<]*)</code>", unescape(html))
        assert expected in shown, (name, shown)
        assert plaintext not in html
    key = GatewayKey.objects.get(name=f"console-{node.name}")
    body = client.get(f"/api/v1/gateway-keys/{key.pk}/").json()
    assert (
        body["masked"]
        == expected
        == client.get(f"/api/v1/endpoints/{endpoint.pk}/").json()["api_key_masked"]
    )
