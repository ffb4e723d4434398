"""Once a second during lab/bench_admission.py's overload run: where the requests are.

Per second: the gateway's queue depth, in-flight and awaiting per tier and its awaiting limit
(/agent/v1/status), each engine's running and waiting (`vllm:num_requests_*` on /metrics), the
CPU share each process used (/proc: the gateway, both engines, this client), and this client's
own event-loop lag (how late a 1 s sleep woke up). So a slow recovery can be placed: in the
engine's queue, the gateway's queue, a saturated gateway or engine core, or a lagging client.
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any

from lab.open_loop import cpu_seconds

_GAUGE = re.compile(rb"^vllm:num_requests_(running|waiting)\{[^}]*\} ([0-9.e+]+)$", re.M)


async def _engine(session: Any, url: str) -> dict[str, float]:
    try:
        async with session.get(url + "/metrics") as resp:
            text = await resp.read()
    except Exception:
        return {}
    return {m.group(1).decode(): float(m.group(2)) for m in _GAUGE.finditer(text)}


async def _gateway(session: Any, url: str, token: str) -> dict[str, Any]:
    try:
        headers = {"Authorization": f"Bearer {token}"}
        async with session.get(url + "/agent/v1/status", headers=headers) as resp:
            status = await resp.json()
    except Exception:
        return {}
    tiers = status.get("tiers", {})
    return {
        "depth": {name: t["depth"] for name, t in tiers.items()},
        "in_flight": {name: t["in_flight"] for name, t in tiers.items()},
        # Released and still without a first token, by the tier each counts as (a stale
        # online request sent on as batch's counts in batch's).
        "awaiting": {name: t.get("awaiting_first_token") for name, t in tiers.items()},
        "released": {name: t["released"] for name, t in tiers.items()},
        "awaiting_limit": status.get("awaiting_limit"),
        # Slots the less urgent tiers leave to online now (the recovery reserve while it holds).
        "reserved_slots": status.get("reserved_slots"),
    }


async def trace(
    session: Any,
    t0: float,
    gateway: str,
    engines: dict[str, str],
    pids: dict[str, int],
    token: str,
    out: list[dict[str, Any]],
) -> None:
    """Append one row a second to `out` until cancelled."""
    loop = asyncio.get_running_loop()
    pids = {**pids, "client": os.getpid()}
    cpu = {name: cpu_seconds(pid) for name, pid in pids.items()}
    last = loop.time()
    while True:
        await asyncio.sleep(1.0)
        now = loop.time()
        lag = now - last - 1.0
        last = now
        row: dict[str, Any] = {"t": round(now - t0, 2), "client_lag_ms": round(lag * 1000, 1)}
        for name, pid in pids.items():
            try:
                spent = cpu_seconds(pid)
            except OSError:
                continue
            row[f"cpu_{name}"] = round(spent - cpu[name], 2)
            cpu[name] = spent
        row["gateway"] = await _gateway(session, gateway, token)
        for name, url in engines.items():
            row[f"engine_{name}"] = await _engine(session, url)
        out.append(row)
        print(f"trace {row}", flush=True)
