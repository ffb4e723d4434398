"""What docs/automation.md says of the gateway's own routes holds against a real gateway:
`/v1/models` takes a gateway key (401 without one), `/health` and `/metrics` take none; and a
console API token sent to a gateway is told that gateways take gateway keys (issue 58)."""

from __future__ import annotations

import json
import subprocess

import httpx

from tests.foundation.test_automation_docs import (  # noqa: F401  (gateway: a fixture)
    KEY,
    blocks,
    gateway,
    localise,
)


def test_the_models_snippet_runs_and_models_needs_a_key(gateway: str) -> None:  # noqa: F811
    snippet = next(b for b in blocks("sh") if "/v1/models" in b)
    proc = subprocess.run(
        ["bash", "-c", localise(snippet, gateway)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    # The two answers back to back: the model list, then the health.
    listed, end = json.JSONDecoder().raw_decode(proc.stdout)
    assert [m["id"] for m in listed["data"]] == ["demo-8b"]
    assert json.loads(proc.stdout[end:])["gateway"] == "ok"
    assert httpx.get(f"{gateway}/v1/models", timeout=10).status_code == 401
    assert httpx.get(f"{gateway}/health", timeout=10).status_code == 200
    assert httpx.get(f"{gateway}/metrics", timeout=10).status_code == 200


def test_a_console_token_at_a_gateway_is_told_what_a_gateway_takes(
    gateway: str,  # noqa: F811
) -> None:
    body = {"model": "demo-8b", "messages": [{"role": "user", "content": "hi"}]}
    token = {"Authorization": "Bearer tgt_0123456789abcdef0123456789abcdef"}
    for response in (
        httpx.post(f"{gateway}/v1/chat/completions", json=body, headers=token, timeout=10),
        httpx.get(f"{gateway}/v1/models", headers=token, timeout=10),
    ):
        assert response.status_code == 401
        error = response.json()["error"]
        assert error["code"] == "invalid_api_key"
        assert "console API token (tgt_...)" in error["message"]
        assert "a gateway takes a gateway key (tgk_...)" in error["message"]
    # Any other unknown key: the plain refusal.
    other = httpx.post(
        f"{gateway}/v1/chat/completions",
        json=body,
        headers={"Authorization": "Bearer sk-not-a-tiergate-key"},
        timeout=10,
    )
    assert other.status_code == 401 and other.json()["error"]["message"] == "invalid API key"
    assert KEY.startswith("tgk_")
