"""Helpers for the agent's tests: agent processes, tier configs, and a fake console.

Agents and simulators run as subprocesses on free ports, exactly as an operator starts them;
the fake console is a small aiohttp server in the test's own event loop that follows
docs/protocol.md, so a test can script its replies and read every heartbeat it got.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web

from gpu_agent.sim.testing import free_port
from gpu_agent.testing import AgentProcess, start_agent_process
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
MODEL = "demo"
ALL_KEY = "tgk_test_all_tiers_0123456789abcdef0123456789abcdef"
OFFLINE_KEY = "tgk_test_offline_only_fedcba9876543210fedcba98765432"
NODE_TOKEN = "tgn_test_node_token_0123456789abcdefghijklmnopq"

KEYS = [
    {
        "name": "all",
        "key": ALL_KEY,
        "tiers": ["online", "batch", "offline"],
        "default_tier": "online",
    },
    {"name": "offline", "key": OFFLINE_KEY, "tiers": ["offline"], "default_tier": "offline"},
]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# What a console sends: the all-tier key, by hash only.
GATEWAY_KEYS = [
    {
        "name": "ops",
        "sha256": sha256(ALL_KEY),
        "tiers": ["online", "batch", "offline"],
        "default_tier": "online",
    },
]
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}


def queue(priority: int, **extra: Any) -> dict[str, Any]:
    return {
        "max_batch_size": 8,
        "max_waiting_time_ms": 1,
        "max_tokens_per_batch": 1_000_000,
        "priority": priority,
        **extra,
    }


def tier_config(admission: dict[str, Any] | None = None, **extra_queues: Any) -> dict[str, Any]:
    queues = {"online": queue(1), "batch": queue(2), "offline": queue(3), **extra_queues}
    scheduler: dict[str, Any] = {"queues": queues}
    if admission:
        scheduler["admission"] = admission
    return {"scheduler": scheduler}


def start_agent(args: list[str], log_path: Path, port: int | None = None) -> AgentProcess:
    """The agent on `args`, up and answering /health; its status() presents NODE_TOKEN.
    ``with start_agent(...) as agent:`` stops it at the end of the block."""
    return start_agent_process(args, log_path, port=port, node_token=NODE_TOKEN)


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data))
    return path


def standalone_args(tmp: Path, engine_url: str, config: dict[str, Any]) -> list[str]:
    return [
        "--engine-url",
        engine_url,
        "--tier-config",
        str(write_json(tmp / "tiers.json", config)),
        "--keys",
        str(write_json(tmp / "keys.json", KEYS)),
        "--node-token",
        NODE_TOKEN,
    ]


# -- fake console ------------------------------------------------------------------------


@dataclass
class FakeConsole:
    """docs/protocol.md's heartbeat endpoint with a scripted desired state."""

    port: int = field(default_factory=free_port)
    beats: list[dict[str, Any]] = field(default_factory=list)
    tier_config: dict[str, Any] | None = None  # {"id", "name", "config"}
    launch_profile: dict[str, Any] | None = None  # {"id", "name", "args", "argv"}
    keys_version: str = ""
    gateway_keys: list[dict[str, Any]] = field(default_factory=list)
    interval_s: float = 0.2
    engine_report_digest: str | None = None  # echoed as a console that holds that report
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def heartbeat(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {NODE_TOKEN}":
            return web.json_response({"error": "bad node token"}, status=401)
        body = await request.json()
        self.beats.append(body)
        applied = body.get("applied", {})
        desired: dict[str, Any] = {}
        for kind, wanted in (
            ("tier_config", self.tier_config),
            ("launch_profile", self.launch_profile),
        ):
            if wanted is None:
                desired[kind] = None
            elif applied.get(kind) == wanted["id"]:
                desired[kind] = {"id": wanted["id"]}
            else:
                desired[kind] = wanted
        reply: dict[str, Any] = {
            "node": {"id": 1, "name": "test-node"},
            "heartbeat_interval_s": self.interval_s,
            "desired": desired,
            "keys_version": self.keys_version,
            "engine_report_digest": self.engine_report_digest,
        }
        if body.get("keys_version") != self.keys_version:
            reply["gateway_keys"] = self.gateway_keys
        return web.json_response(reply)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/api/v1/agent/heartbeat", self.heartbeat)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def wait_beat(
        self, predicate: Any, timeout: float = 10.0, what: str = "a beat"
    ) -> dict[str, Any]:
        """The first beat from now on that satisfies `predicate`."""
        deadline = time.monotonic() + timeout
        seen = len(self.beats)
        while True:
            for beat in self.beats[seen:]:
                if predicate(beat):
                    return beat
            seen = len(self.beats)
            if time.monotonic() > deadline:
                last = self.beats[-1] if self.beats else None
                raise AssertionError(f"no heartbeat with {what}; last: {json.dumps(last)[:2000]}")
            await asyncio.sleep(0.05)


async def engine_read(agent: AgentProcess, timeout: float = 20.0) -> None:
    """Until the agent's sampler has read the engine once (its model list is known): what the
    agent learns on its first tick is in place before the test's first request."""

    def known() -> bool:
        return agent.status()["engine"]["model"] is not None

    await asyncio.to_thread(wait_for, known, timeout, "the agent's first reading of the engine")


async def post(agent: AgentProcess, tier: str = "online", **extra: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {ALL_KEY}", "X-Tiergate-Tier": tier}
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.post(
            agent.url + "/v1/chat/completions", json={**CHAT, **extra}, headers=headers
        )


def assert_niceness_acts(engine: int, agent: int) -> None:
    """The engine is in a process group of its own (stopping it stops its workers) but in
    the agent's session and so in its autogroup, where niceness orders the two: from a session
    of its own it would share the CPU equally with the agent whatever its niceness."""
    assert os.getpgid(engine) == engine
    assert os.getsid(engine) == os.getsid(agent)
    group = Path(f"/proc/{engine}/autogroup")
    if group.exists():  # a kernel built with autogroups
        # "/autogroup-N nice K", or empty for a session still in the root task group (one that
        # descends from init with no setsid on the way, as under some CI runners): the same text
        # means the same group either way.
        assert _group_of(engine) == _group_of(agent)


def _group_of(pid: int) -> str:
    return " ".join(Path(f"/proc/{pid}/autogroup").read_text().split()[:1])
