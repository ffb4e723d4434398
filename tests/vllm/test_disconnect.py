"""A client that goes away makes vLLM abort its request: the gateway cancels the upstream
stream, vLLM's running count returns to 0 long before the request would have ended, and vLLM
stops generating for it."""

from __future__ import annotations

import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpu_agent.testing import AgentProcess
from tests.vllm.vllm_helpers import AUTH, MODEL_NAME, NO_EOS, TIMEOUT, VllmServer
from tests.waiting import wait_for

pytestmark = [pytest.mark.vllm, TIMEOUT]

LONG = 3000  # tokens: tens of seconds on one CPU core, far longer than the test waits


def test_a_client_disconnect_aborts_the_request_in_vllm(
    gateway: AgentProcess, vllm_priority: VllmServer
) -> None:
    wait_for(lambda: vllm_priority.samples()["vllm:num_requests_running"] == 0, 60, "idle vLLM")
    tokens_before = vllm_priority.samples()["vllm:generation_tokens_total"]
    body = {"model": MODEL_NAME, "prompt": "go on", "max_tokens": LONG, "stream": True, **NO_EOS}
    with (
        httpx.Client(timeout=120) as client,
        client.stream("POST", gateway.url + "/v1/completions", json=body, headers=AUTH) as response,
    ):
        assert response.status_code == 200
        # Kept in a variable: a `for` loop left by `break` drops its iterator, and httpx closes
        # the connection then, before the test looks.
        lines = response.iter_lines()
        chunks = 0
        while chunks < 5:
            chunks += next(lines).startswith("data: ")
        # vLLM refreshes its gauges once per logging interval, not per token.
        wait_for(
            lambda: vllm_priority.samples()["vllm:num_requests_running"] == 1,
            30,
            "vLLM to count the request running",
            poll=0.2,
        )
        # Leaving the block closes the connection mid-stream.
    gone_at = time.monotonic()
    wait_for(
        lambda: vllm_priority.samples()["vllm:num_requests_running"] == 0,
        60,
        "vLLM to abort the request",
        poll=0.2,
    )
    aborted_in = time.monotonic() - gone_at
    produced = vllm_priority.samples()["vllm:generation_tokens_total"] - tokens_before
    assert produced < LONG / 2, f"vLLM went on generating: {produced} tokens in {aborted_in:.1f} s"
    assert gateway.status()["in_flight"] == 0
    # The gateway counted it as the client's cancel, not an engine error.
    text = httpx.get(gateway.url + "/metrics", timeout=10).text
    cancelled = [
        s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "tiergate_requests_total" and s.labels.get("status") == "cancelled"
    ]
    assert sum(cancelled) >= 1
