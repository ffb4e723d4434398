"""The engine state a run inherits and meets: prefix-cache reset before it, the engine's
counters and the machines' load before and after (docs/architecture.md#benchmarks, A/A stability).

A node gateway (endpoint kind `gateway`) is reached through its agent's benchmark controls
(docs/protocol.md), with the endpoint's own all-tier key. A direct vLLM or simulator (kind
`vllm`) is asked itself: `POST /reset_prefix_cache` and `/metrics`. An external endpoint is
left alone; its runs rely on the prompt salt. Every probe failure is recorded, none fails the
run: the figures are context for the comparison, not results.
"""

from __future__ import annotations

import os
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from console.bench.models import BenchmarkRun
from console.fleet.choices import EndpointKind
from console.fleet.models import Endpoint

TIMEOUT = httpx.Timeout(5.0, connect=2.0)
# vLLM's counters a run's figures are differences of (the agent reads the same names).
VLLM_COUNTERS = {
    "vllm:prefix_cache_queries": "prefix_queries",
    "vllm:prefix_cache_hits": "prefix_hits",
    "vllm:num_preemptions": "preemptions_total",
}


def _root(endpoint: Endpoint) -> str:
    return endpoint.base_url.rstrip("/").removesuffix("/v1")


def _headers(endpoint: Endpoint) -> dict[str, str]:
    key = endpoint.get_api_key()
    return {"Authorization": f"Bearer {key}"} if key else {}


def machine_load() -> dict[str, Any]:
    load1, load5, _ = os.getloadavg()
    return {"load1": load1, "load5": load5, "cpus": os.cpu_count()}


def parse_vllm_counters(text: str) -> dict[str, float | None]:
    out: dict[str, float | None] = dict.fromkeys(VLLM_COUNTERS.values())
    for family in text_string_to_metric_families(text):
        key = VLLM_COUNTERS.get(family.name.removesuffix("_total"))
        values = [
            float(s.value)
            for s in family.samples
            if not s.name.endswith("_created")  # a counter's creation time, not a count
        ]
        if key is not None and values:
            out[key] = sum(values)
    return out


def reset_prefix_cache(endpoint: Endpoint, client: httpx.Client) -> str:
    """ "done", or why not (the run's prompts are salted either way)."""
    if endpoint.kind == EndpointKind.GATEWAY:
        url = _root(endpoint) + "/agent/v1/engine/reset-prefix-cache"
    elif endpoint.kind == EndpointKind.VLLM:
        url = _root(endpoint) + "/reset_prefix_cache"
    else:
        return "not tried: external endpoint"
    try:
        answer = client.post(url, headers=_headers(endpoint))
    except httpx.HTTPError as exc:
        return f"failed: {type(exc).__name__}: {exc}"[:300]
    if answer.status_code == 200:
        return "done"
    if answer.status_code in (404, 405, 501):
        return "not supported by the engine (vLLM needs VLLM_SERVER_DEV_MODE=1)"
    return f"failed: HTTP {answer.status_code}: {answer.text[:200]}"


def engine_state(endpoint: Endpoint, client: httpx.Client) -> dict[str, Any]:
    """{"engine": counters, "host": load} of the target, or {"error": text}."""
    try:
        if endpoint.kind == EndpointKind.GATEWAY:
            answer = client.get(
                _root(endpoint) + "/agent/v1/engine/state", headers=_headers(endpoint)
            )
            answer.raise_for_status()
            body = answer.json()
            return {"engine": body.get("engine") or {}, "host": body.get("host")}
        if endpoint.kind == EndpointKind.VLLM:
            answer = client.get(_root(endpoint) + "/metrics", headers=_headers(endpoint))
            answer.raise_for_status()
            return {"engine": parse_vllm_counters(answer.text), "host": None}
    except (httpx.HTTPError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"error": "external endpoint: no engine counters"}


def before_run(run: BenchmarkRun) -> dict[str, Any]:
    """Reset the prefix cache, then read the counters the run's figures start from."""
    with httpx.Client(timeout=TIMEOUT) as client:
        reset = reset_prefix_cache(run.endpoint, client)
        state = engine_state(run.endpoint, client)
    return {"reset": reset, "state": state, "client": machine_load()}


def after_run(run: BenchmarkRun, before: dict[str, Any]) -> dict[str, Any]:
    """The run's conditions: what was reset, the engine's figures over the run, the loads."""
    with httpx.Client(timeout=TIMEOUT) as client:
        state = engine_state(run.endpoint, client)
    return conditions_of(before, state, machine_load(), str(run.workload.get("salt") or ""))


def _delta(after: dict[str, Any], before: dict[str, Any], key: str) -> float | None:
    if after.get(key) is None or before.get(key) is None:
        return None
    return float(after[key]) - float(before[key])


def conditions_of(
    before: dict[str, Any], state_after: dict[str, Any], client_after: dict[str, Any], salt: str
) -> dict[str, Any]:
    """Pure: the stored `conditions` of a run from the probes either side of it."""
    state_before = before["state"]
    engine: dict[str, Any] | None = None
    errors = [s["error"] for s in (state_before, state_after) if "error" in s]
    if not errors:
        eb, ea = state_before["engine"], state_after["engine"]
        queries, hits = _delta(ea, eb, "prefix_queries"), _delta(ea, eb, "prefix_hits")
        preemptions = _delta(ea, eb, "preemptions_total")
        engine = {
            "prefix_queries": queries,
            "prefix_hits": hits,
            "prefix_hit_rate": hits / queries if queries and hits is not None else None,
            # A restarted engine starts its counters again: a negative difference means that.
            "preemptions": preemptions if preemptions is None or preemptions >= 0 else None,
        }
    host_before, host_after = state_before.get("host"), state_after.get("host")
    return {
        "prefix_cache_reset": before["reset"],
        "salt": salt,
        "engine": engine,
        "target_load": _load(host_before, host_after),
        "client_load": _load(before["client"], client_after),
        "probe_errors": errors,
    }


def _load(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any] | None:
    if not before or not after:
        return None
    return {
        "load1_before": before.get("load1"),
        "load1_after": after.get("load1"),
        "cpus": after.get("cpus"),
    }
