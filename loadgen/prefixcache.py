"""The engine's prefix cache over a command-line run: its counters read before and after, where
the target lets them be read, and whether the run's TTFT and throughput measured the cache.

vLLM counts, in prompt tokens, what its prefix cache was asked for and what it held
(`vllm:prefix_cache_queries`, `vllm:prefix_cache_hits`, counters on its `/metrics`; the
simulator exposes the same names). A Tiergate gateway serves its own `/metrics`, and the
engine's two counters at `/agent/v1/engine/state` for a key that may use every tier
(docs/architecture.md#agent-and-console-protocol). Anything else (an external endpoint, a key
without every tier) leaves the figure unread, and the run says why rather than guessing.
Prompts are salted per run by default (docs/architecture.md#benchmarks), so a high rate is
a warning, not the normal case.

Stdlib only: two small GETs either side of the run, outside its event loop and its timing.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

COUNTERS = {"vllm:prefix_cache_queries": "queries", "vllm:prefix_cache_hits": "hits"}
TIMEOUT_S = 3.0
# A hit rate this far above what the workload shares on purpose (`shared_prefix_tokens`) means
# the run found earlier prompts in the cache: its TTFT and throughput are the cache's.
HIGH_MARGIN = 0.10


@dataclass(frozen=True, slots=True)
class Counters:
    queries: float
    hits: float
    source: str  # the route they were read from


def root_of(base_url: str) -> str:
    """`http://host:port/v1` -> `http://host:port` (the engine's and agent's own routes)."""
    root = base_url.rstrip("/")
    return root.removesuffix("/v1").rstrip("/")


def parse_metrics(text: str) -> tuple[float, float] | None:
    """(queries, hits) from Prometheus text: each counter summed over its label sets (one per
    engine), its `_created` samples left out; None when either is missing."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name.endswith("_created"):
            continue
        key = COUNTERS.get(name.removesuffix("_total"))
        if key is None:
            continue
        rest = line.rsplit("}", 1)[1] if "}" in line else line[len(name) :]
        try:
            value = float(rest.split()[0])  # a timestamp may follow the value
        except (IndexError, ValueError):
            continue
        totals[key] = totals.get(key, 0.0) + value
    if "queries" not in totals or "hits" not in totals:
        return None
    return totals["queries"], totals["hits"]


def _get(url: str, api_key: str | None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return int(response.status), response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        exc.close()
        return int(exc.code), ""


def read_counters(base_url: str, api_key: str | None) -> Counters | str:
    """The engine's counters now, or why they cannot be read."""
    root = root_of(base_url)
    try:
        status, text = _get(root + "/metrics", api_key)
        if status == 200 and (found := parse_metrics(text)) is not None:
            return Counters(found[0], found[1], "/metrics")
        state_status, body = _get(root + "/agent/v1/engine/state", api_key)
    except (OSError, ValueError) as exc:  # refused, timed out, not HTTP
        return f"{type(exc).__name__}: {exc}"[:200]
    if state_status != 200:
        return (
            f"no vLLM prefix-cache counters at /metrics (HTTP {status}) and none at "
            f"/agent/v1/engine/state (HTTP {state_status})"
        )
    try:
        engine: Any = json.loads(body).get("engine") or {}
        queries, hits = engine.get("prefix_queries"), engine.get("prefix_hits")
    except (ValueError, AttributeError):
        return "/agent/v1/engine/state answered something else than JSON"
    if not isinstance(queries, int | float) or not isinstance(hits, int | float):
        return "the engine behind the gateway reports no prefix-cache counters"
    return Counters(float(queries), float(hits), "/agent/v1/engine/state")


def report(
    before: Counters | str, after: Counters | str, expected_share: float | None
) -> dict[str, Any]:
    """What the JSON keeps and the summary prints: the counters' rise over the run and the hit
    rate, with `high` when it is well above `expected_share` (the share of every prompt the
    workload repeats on purpose; None: unknown, as with a prompts file)."""
    if isinstance(before, str) or isinstance(after, str):
        why = before if isinstance(before, str) else after
        return {"readable": False, "why": str(why)}
    queries, hits = after.queries - before.queries, after.hits - before.hits
    if queries < 0 or hits < 0:  # the counters started again: the engine restarted mid-run
        return {"readable": False, "why": "the engine's counters went back (it restarted)"}
    rate = hits / queries if queries > 0 else None
    expected = expected_share or 0.0
    return {
        "readable": True,
        "source": after.source,
        "queries": queries,
        "hits": hits,
        "hit_rate": rate,
        "expected_share": expected_share,
        "high": rate is not None and rate > expected + HIGH_MARGIN,
    }


def expected_share(
    prompt_tokens: int, shared_prefix_tokens: int, prompts_file: str | None
) -> float | None:
    """The share of each synthetic prompt that is the same in every request (the shared
    prefix); None with a prompts file, whose repeats the generator cannot know."""
    if prompts_file:
        return None
    return shared_prefix_tokens / prompt_tokens if prompt_tokens else 0.0
