"""Probe load for the SLO guard: when a watched wave's own traffic is too thin to judge, the
benchmark's load generator (loadgen) sends a short, modest load of its own through the wave's
gateways, and the same probe through a node still on the old versions (or, with none left, the
same nodes before their change) is what it is compared with (docs/rollouts.md, "When the wave
is quiet").

Each probe goes through the node's gateway with the console's own all-tier key (the `gateway`
endpoint, console/fleet/services.py ensure_gateway_endpoint), so it meets the tier config being
rolled out exactly as clients do. The tiers are the tier config's, the guarded tier weighted to
half of the requests so that its TTFT P99 rests on enough of them. Prompts are salted per probe:
a second probe must not find the first one's prompts in the prefix cache and look faster.

While it runs the probe calls `keepalive` about every half second (the executor renews its
lease there and looks for an abort); a False answer stops every probe at once.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db import connections

from console.fleet.choices import EndpointKind
from console.fleet.gateway_keys import node_key_name
from console.fleet.models import Endpoint, GatewayKey, Node
from console.tuning.rollouts import guard
from loadgen import Progress, RunResult, WorkloadSpec, run_workload

log = logging.getLogger(__name__)

MAX_PROBED_NODES = 3  # per side: a few nodes of a big wave say enough, and cost little
PROBE_REQUESTS = 40  # per node, spread over the probe's seconds...
MAX_RATE = 10.0  # ...at no more than this many a second: load a node barely notices
PROMPT_TOKENS = 128
MAX_TOKENS = 32
REQUEST_TIMEOUT_S = 30.0
MIN_PROBE_S, MAX_PROBE_S = 1.0, 60.0
REFUSED = (401, 403)  # the gateway refused the console's key: the probe says nothing


@dataclass(frozen=True)
class Target:
    node: str
    base_url: str
    api_key: str
    model: str
    tiers: frozenset[str]  # what its key may use (empty: not known)


def target_of(node: Node) -> Target | str:
    """How to probe `node` through its gateway, or why it cannot be."""
    endpoint = (
        Endpoint.objects.select_related("node").filter(node=node, kind=EndpointKind.GATEWAY).first()
    )
    if endpoint is None:
        return f"{node.name} has no gateway endpoint yet (its agent has not reported)"
    key = endpoint.get_api_key()
    model = endpoint.model_to_use()
    if not key or not model:
        return f"{endpoint.name} has no {'API key' if not key else 'model'} to probe with"
    held = GatewayKey.objects.active().filter(name=node_key_name(node)).first()
    tiers = frozenset(str(t) for t in held.tiers) if held is not None else frozenset()
    return Target(node.name, endpoint.base_url, key, model, tiers)


def pick(nodes: Iterable[Node], limit: int = MAX_PROBED_NODES) -> tuple[list[Target], list[str]]:
    """Up to `limit` probe targets among `nodes`, in order, and why the others could not be."""
    targets: list[Target] = []
    missing: list[str] = []
    for node in nodes:
        if len(targets) >= limit:
            break
        found = target_of(node)
        if isinstance(found, str):
            missing.append(found)
        else:
            targets.append(found)
    return targets, missing


def tier_mix(
    config_tiers: list[str], targets: Iterable[Target], guard_tier: str
) -> dict[str, float]:
    """The config's tiers that every target's key may use; the guarded tier gets half of the
    requests, the others share the rest."""
    allowed = [t.tiers for t in targets if t.tiers]
    tiers = [t for t in config_tiers if all(t in a for a in allowed)]
    if not tiers:
        return {}
    if guard_tier not in tiers:
        return dict.fromkeys(tiers, 1.0)
    others = [t for t in tiers if t != guard_tier]
    if not others:
        return {guard_tier: 1.0}
    return {guard_tier: 0.5, **dict.fromkeys(others, 0.5 / len(others))}


def spec_for(target: Target, mix: dict[str, float], seconds: float) -> WorkloadSpec:
    seconds = min(max(seconds, MIN_PROBE_S), MAX_PROBE_S)
    return WorkloadSpec(
        base_url=target.base_url,
        model=target.model,
        api_key=target.api_key,
        rate=min(MAX_RATE, PROBE_REQUESTS / seconds),
        arrival="poisson",
        duration_s=seconds,
        prompt_tokens=PROMPT_TOKENS,
        max_tokens=MAX_TOKENS,
        seed=secrets.randbelow(1 << 30),
        salt=f"probe-{secrets.token_hex(4)}",
        tier_mix=mix,
        timeout_s=REQUEST_TIMEOUT_S,
    )


@dataclass
class Outcome:
    """Per side ("before", "after"): the figures and the nodes probed. `error` says why the
    probe tells nothing (it could not run, or the console's key was refused); `stopped`: the
    keepalive asked it to stop (an abort, or the lease lost)."""

    stats: dict[str, guard.WindowStats] = field(default_factory=dict)
    nodes: dict[str, list[str]] = field(default_factory=dict)
    error: str = ""
    stopped: bool = False


def run(
    sides: dict[str, list[Target]],
    mix: dict[str, float],
    seconds: float,
    tier: str,
    keepalive: Callable[[], bool],
) -> Outcome:
    """Probe every target of every side at once (one event loop, this thread)."""
    plan = [
        (side, t, spec_for(t, mix, seconds)) for side, targets in sides.items() for t in targets
    ]
    cancel = threading.Event()
    caller = threading.get_ident()

    def progress(_: Progress) -> None:
        try:
            if not keepalive():
                cancel.set()
        finally:
            if threading.get_ident() != caller:
                # loadgen's helper threads come and go: leave no database connection behind.
                connections.close_all()

    async def all_probes() -> list[RunResult]:
        return list(
            await asyncio.gather(
                *(
                    run_workload(
                        spec, on_progress=progress if i == 0 else None, cancel_event=cancel
                    )
                    for i, (_, _, spec) in enumerate(plan)
                )
            )
        )

    outcome = Outcome(nodes={side: [t.node for t in targets] for side, targets in sides.items()})
    try:
        results = asyncio.run(all_probes())
    except Exception as exc:  # a probe that cannot run must pause the rollout, not end it
        log.exception("rollout probe failed")
        outcome.error = f"{type(exc).__name__}: {exc}"[:300]
        return outcome
    if cancel.is_set():
        outcome.stopped = True
        return outcome
    per_side: dict[str, list[guard.WindowStats]] = {side: [] for side in sides}
    for (side, target, _), result in zip(plan, results, strict=True):
        refused = next((s for s in result.samples if s.status in REFUSED), None)
        if refused is not None:
            outcome.error = f"{target.node}'s gateway refused the console's key: {refused.error}"
            return outcome
        per_side[side].append(guard.from_samples(result.samples, tier))
    outcome.stats = {side: guard.pooled(stats) for side, stats in per_side.items()}
    return outcome
