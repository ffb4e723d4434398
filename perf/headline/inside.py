"""Where a slow first token's time went inside the gateway: a client's requests joined with the
gateway's `--trace` lines (gpu_agent.trace; `perf.headline --gateway-trace` writes them).

The client's TTFT runs from its send to the first content chunk reaching its socket. With the
gateway's line for the same request it splits, in milliseconds, into:
- `to_gateway`: send to the gateway's handler starting (accept, the client's and the
  gateway's loops, the HTTP parse);
- `wait`: queued in the gateway until the scheduler released it;
- `to_head`: release to the engine's response head (the connection, the engine's HTTP server
  taking it);
- `to_first`: the engine's head to its first delta reaching the gateway (the engine's queue and
  prefill, as vLLM's own `time_to_first_token` would count most of it);
- `to_client`: the gateway having the first delta to the client's socket having it.

The five add up to the client's TTFT (both clocks are this machine's wall clock). The gateway's
loop stalls (`lag` lines) that overlap a request are given beside it: a stall inside `wait` or
`to_client` is the gateway's own loop, or the machine. Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from loadgen.types import RequestSample

# The gateway's upstream ids: `tg<pid in hex>-<n>`; the engine's response id carries it
# (`chatcmpl-tg1f2e-17`: vLLM's and the simulator's id is the x-request-id behind a prefix).
_GATEWAY_ID = re.compile(r"tg[0-9a-f]+-\d+")


def gateway_id(response_id: str | None) -> str | None:
    if not response_id:
        return None
    found = _GATEWAY_ID.search(response_id)
    return found.group(0) if found else None


def split(sample: RequestSample, line: dict[str, Any]) -> dict[str, float] | None:
    """The sample's TTFT split by the gateway's line (see the module docstring); None when
    either side lacks a first token."""
    if sample.ttft is None or line.get("first") is None or line.get("wait") is None:
        return None
    to_gateway = (float(line["at"]) - sample.send_time) * 1000
    wait, first = float(line["wait"]), float(line["first"])
    head = float(line["head"]) if line.get("head") is not None else first
    ttft = sample.ttft * 1000
    return {
        "ttft": round(ttft, 1),
        "to_gateway": round(to_gateway, 1),
        "wait": round(wait, 1),
        "to_head": round(head - wait, 1),
        "to_first": round(first - head, 1),
        "to_client": round(ttft - to_gateway - first, 1),
    }


def stalls_during(
    lags: Sequence[dict[str, float]], start: float, end: float
) -> list[tuple[float, float]]:
    """The loop stalls (start, end; unix seconds) that overlap [start, end]: a `lag` line's
    stall ends at its `at` and began `lag` seconds before."""
    out = []
    for lag in lags:
        stop = lag["at"]
        begin = stop - lag["lag"]
        if begin <= end and stop >= start:
            out.append((begin, stop))
    return out


def inside(
    tail: Sequence[RequestSample],
    requests: Sequence[dict[str, Any]],
    lags: Sequence[dict[str, float]],
) -> list[dict[str, Any]]:
    """Each tail request's split and the gateway loop's stalls during it (ms), in tail order;
    requests the trace lacks are left out."""
    by_id = {str(line["id"]): line for line in requests}
    out = []
    for sample in tail:
        rid = gateway_id(sample.response_id)
        line = by_id.get(rid) if rid else None
        if line is None:
            continue
        parts = split(sample, line)
        if parts is None:
            continue
        end = sample.send_time + (sample.ttft or 0.0)
        stalls = stalls_during(lags, sample.send_time, end)
        stalled = sum(min(b, end) - max(a, sample.send_time) for a, b in stalls)
        parts["stalled"] = round(stalled * 1000, 1)
        out.append({"index": sample.index, "id": rid, **parts})
    return out


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The tail's mean split: where its requests' time went, on average (ms)."""
    keys = ("ttft", "to_gateway", "wait", "to_head", "to_first", "to_client", "stalled")
    if not rows:
        return {}
    return {k: round(sum(r[k] for r in rows) / len(rows), 1) for k in keys}
