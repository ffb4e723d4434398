"""The headline experiment's arms, defined once: what each arm runs (engine policy, gateway tier
config, what the client sends) as data. arms.py runs them; `standard_arms()` lists the arms
(a)-(d) that --arms may name besides (e), which the search makes (search.py).

An arm also says how its traffic reaches the engine (`front`) and what its client sends
(`spec`): the engine itself or a fresh gateway in front of it, with the gateway's key or vLLM's
`priority` per tier. The experiments under lab/ subclass Arm for other fronts and clients.
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.bench.headline.procs import GATEWAY_KEY, run_gateway
from console.bench.headline.workload import SEED_TIER_CONFIG, TIER_PRIORITY, arm_spec
from loadgen import WorkloadSpec


@dataclass(frozen=True)
class Arm:
    key: str  # one letter, as --arms names it
    name: str  # short slug, used for files and run labels
    title: str
    policy: str  # the engine's --scheduling-policy
    tier_config: dict[str, Any] | None = None  # None: straight to the engine
    send_priority: bool = False  # the client sets vLLM's `priority` per tier itself

    @property
    def via_gateway(self) -> bool:
        return self.tier_config is not None

    def gateway_config(self, flags: list[str]) -> dict[str, Any] | None:
        """The tier config the arm's gateway runs against an engine started with `flags`."""
        return self.tier_config

    def front(
        self, engine_url: str, flags: list[str], workdir: Path
    ) -> AbstractContextManager[str]:
        """What the client sends to, started for this arm and stopped after it: a gateway in
        front of the engine at `engine_url` (started with `flags`), or the engine itself."""
        config = self.gateway_config(flags)
        if config is None:
            return contextlib.nullcontext(engine_url)
        return run_gateway(engine_url, config, workdir, self.name)

    def spec(self, base_url: str, **shared: Any) -> WorkloadSpec:
        """The client's workload against `base_url`: the replay every arm shares (`shared`:
        workload.arm_spec's other arguments), with the gateway's key or the tiers' priorities."""
        return arm_spec(
            base_url=base_url,
            api_key=GATEWAY_KEY if self.via_gateway else None,
            tier_priority=TIER_PRIORITY if self.send_priority else None,
            **shared,
        )

    def record(self) -> dict[str, Any]:
        """What the experiment's record says of the arm (ArmOutcome.to_json)."""
        return {
            "key": self.key,
            "name": self.name,
            "title": self.title,
            "engine_policy": self.policy,
            "via_gateway": self.via_gateway,
            "client_sends_priority": self.send_priority,
        }


def standard_arms() -> list[Arm]:
    """Issue 9's arms (a)-(d): FCFS, the engine's priority alone, and the gateway with seed
    000's tier config in front of either policy; arm (e) comes from the search (search.py)."""
    return [
        Arm("a", "direct-fcfs", "engine direct, fcfs", "fcfs"),
        Arm("b", "direct-priority", "engine direct, priority policy, priority per tier",
            "priority", send_priority=True),
        Arm("c", "gateway-seed-fcfs", "gateway (seed 000 tiers), engine fcfs", "fcfs",
            SEED_TIER_CONFIG),
        Arm("d", "gateway-seed-priority",
            "gateway (seed 000 tiers), engine priority, priority passed through", "priority",
            SEED_TIER_CONFIG),
    ]  # fmt: skip


def arm_keys(arms: list[Arm] | None = None) -> str:
    """Every arm --arms may name: those of `arms` (default: the standard ones) and the
    search's (e)."""
    return "".join(sorted({arm.key for arm in arms or standard_arms()} | {"e"}))
