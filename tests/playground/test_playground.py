"""The playground against real engines: both sides stream, are timed and saved; a saved side
replays without calling the engine again; errors are shown, bad input is a 400."""

from __future__ import annotations

import json
from typing import Any

import httpx
from django.test import Client

from console.playground.forms import parse_conversation
from console.playground.models import Comparison, Side
from tests.playground.conftest import KEY


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def form(endpoints: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    data = {
        "endpoint_a": endpoints["gateway"].pk,
        "model_a": "",
        "tier_a": "batch",
        "endpoint_b": endpoints["direct"].pk,
        "model_b": "",
        "tier_b": "",
        "conversation": "system: be brief\nuser: Say hello\nin two lines",
        "max_tokens": 12,
        "temperature": 0.5,
    }
    data.update(overrides)
    return data


def events(response: Any) -> list[tuple[str, dict[str, Any]]]:
    raw = b"".join(response.streaming_content).decode()
    out = []
    for block in raw.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def sim_request_count(base: str) -> int:
    return len(httpx.get(f"{base}/sim/v1/requests", timeout=5).json()["data"])


def test_both_sides_stream_timed_and_saved(operator: Any, endpoints: dict[str, Any]) -> None:
    client = signed_in(operator)
    created = client.post("/playground/", form(endpoints))
    assert created.status_code == 302, created.content
    comparison = Comparison.objects.get()
    assert comparison.messages == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "Say hello\nin two lines"},
    ]
    page = client.get(created["Location"]).content.decode()
    assert KEY not in page and "stream/a/" in page and "stream/b/" in page
    # The tier the answer came in: the gateway's X-Tiergate-Tier; a plain engine has none.
    for name, tier in (("a", "batch"), ("b", "none (not a gateway)")):
        got = events(client.get(f"/playground/{comparison.pk}/stream/{name}/"))
        deltas = [d["content"] for kind, d in got if kind == "delta"]
        kind, done = got[-1]
        assert kind == "done" and done["status"] == "done", got[-1]
        assert len(deltas) >= 2 and "".join(deltas) == done["text"]
        assert done["tier"] == tier and done["completion_tokens"] == 12
        assert done["ttft_ms"] > 0 and done["tpot_ms"] > 0 and done["prompt_tokens"] > 0
        assert done["e2e_ms"] >= done["ttft_ms"]
    sides = {s.name: s for s in Side.objects.all()}
    assert sides["a"].model == "alpha" and sides["b"].model == "beta"
    assert all(s.status == "done" and s.text for s in sides.values())


def test_a_saved_side_replays_without_calling_the_engine(
    operator: Any, endpoints: dict[str, Any], engines: Any
) -> None:
    client = signed_in(operator)
    client.post("/playground/", form(endpoints))
    pk = Comparison.objects.get().pk
    first = events(client.get(f"/playground/{pk}/stream/b/"))
    before = sim_request_count(engines.direct_url)
    again = events(client.get(f"/playground/{pk}/stream/b/"))
    assert [k for k, _ in again] == ["done"] and again[0][1]["text"] == first[-1][1]["text"]
    assert sim_request_count(engines.direct_url) == before
    reopened = client.get(f"/playground/{pk}/").content.decode()
    assert first[-1][1]["text"] in reopened and "stream/b/" not in reopened


def test_rerun_makes_a_new_comparison_with_the_same_prompt(
    operator: Any, endpoints: dict[str, Any]
) -> None:
    client = signed_in(operator)
    client.post("/playground/", form(endpoints))
    old = Comparison.objects.get()
    response = client.post(f"/playground/{old.pk}/rerun/")
    new = Comparison.objects.exclude(pk=old.pk).get()
    assert response["Location"] == f"/playground/{new.pk}/"
    assert new.messages == old.messages
    assert [(s.endpoint_id, s.model, s.tier, s.status) for s in new.sides.all()] == [
        (s.endpoint_id, s.model, s.tier, "pending") for s in old.sides.all()
    ]


def test_engine_and_gateway_errors_are_shown(operator: Any, endpoints: dict[str, Any]) -> None:
    client = signed_in(operator)
    data = form(endpoints, endpoint_b=endpoints["dead"].pk, tier_a="offline")
    client.post("/playground/", data)
    pk = Comparison.objects.get().pk
    refused = events(client.get(f"/playground/{pk}/stream/a/"))[-1][1]
    assert refused["status"] == "failed" and refused["error"].startswith("HTTP 403")
    assert "offline" in refused["error"]
    dead = events(client.get(f"/playground/{pk}/stream/b/"))[-1][1]
    assert dead["status"] == "failed" and "Connect" in dead["error"]
    unknown = form(endpoints, model_b="no-such-model")
    client.post("/playground/", unknown)
    pk = Comparison.objects.order_by("-pk").first().pk
    missing = events(client.get(f"/playground/{pk}/stream/b/"))[-1][1]
    assert missing["status"] == "failed" and missing["error"].startswith("HTTP 404")


def test_bad_input_is_a_400_naming_the_field(operator: Any, endpoints: dict[str, Any]) -> None:
    client = signed_in(operator)
    cases = {
        "temperature": {"temperature": "nan"},
        "max_tokens": {"max_tokens": 0},
        "conversation": {"conversation": "user: hi\nassistant: hello"},
        "tier_a": {"tier_a": "Online Tier"},
        "endpoint_b": {"endpoint_b": "99999"},
    }
    for field, change in cases.items():
        response = client.post("/playground/", form(endpoints, **change))
        assert response.status_code == 400, field
        assert field in response.context["form"].errors, (field, response.context["form"].errors)
    assert Comparison.objects.count() == 0


def test_viewers_may_not_use_the_playground(viewer: Any, endpoints: dict[str, Any]) -> None:
    client = signed_in(viewer)
    assert client.get("/playground/").status_code == 403
    assert client.post("/playground/", form(endpoints)).status_code == 403
    assert Comparison.objects.count() == 0


def test_a_plain_prompt_is_one_user_message() -> None:
    assert parse_conversation("  hello\nthere ") == [{"role": "user", "content": "hello\nthere"}]
