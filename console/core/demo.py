"""The processes and data of `manage.py demo` (the README's first command).

Each app adds what it needs to the demo by appending to DEMO_SEEDERS (dotted paths of
functions called once after migrate, given the demo admin) and DEMO_PROCESSES (functions that
return process specs). Keeping the list here means one place says what the demo runs.
"""

from __future__ import annotations

import importlib
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ProcessSpec:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    ready_url: str | None = None


@dataclass
class DemoContext:
    host: str
    port: int
    data_dir: Path
    admin: Any

    @property
    def console_url(self) -> str:
        return f"http://{self.host}:{self.port}"


# Dotted paths, resolved lazily so an app that is absent simply contributes nothing.
DEMO_SEEDERS: list[str] = []
DEMO_PROCESSES: list[str] = ["console.core.demo.core_processes", "console.core.demo.node_processes"]

# The engine command line of each demo node, written by the tuning app's seeder from the
# node's own launch profile (so a demo node starts with a profile and no drift):
# {"demo-node-1": ["vllm", "serve", ...], ...}. The agent runs `vllm serve` as the simulator.
DEMO_ENGINES_FILE = "demo-engines.json"


def core_processes(ctx: DemoContext) -> list[ProcessSpec]:
    python = sys.executable
    return [
        ProcessSpec(
            "web",
            [python, "manage.py", "runserver", "--noreload", f"{ctx.host}:{ctx.port}"],
            ready_url=f"{ctx.console_url}/healthz?worker=0",
        ),
        ProcessSpec(
            "worker",
            [
                python,
                "-m",
                "celery",
                "-A",
                "console",
                "worker",
                "--beat",
                "--loglevel",
                "INFO",
                "--concurrency",
                str(min(4, os.cpu_count() or 2)),
                "--schedule",
                str(ctx.data_dir / "celerybeat-schedule"),
            ],
        ),
    ]


def node_processes(ctx: DemoContext) -> list[ProcessSpec]:
    """One managed agent per demo node (see console.fleet.demo), each supervising a simulated
    engine. The node token travels in the environment, not argv, so `ps` does not show it."""
    import json

    try:
        nodes = json.loads((ctx.data_dir / "demo-nodes.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    try:
        engines = json.loads((ctx.data_dir / DEMO_ENGINES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        engines = {}
    specs = []
    for node in nodes:
        argv = engines.get(node["name"]) or ["vllm", "serve", "demo-8b"]
        engine_cmd = shlex.join([*argv, "--port", str(node["engine_port"])])
        specs.append(
            ProcessSpec(
                f"agent {node['name']}",
                [
                    sys.executable,
                    "-m",
                    "gpu_agent",
                    "--engine-cmd",
                    engine_cmd,
                    "--simulate",
                    "--listen",
                    f"{ctx.host}:{node['agent_port']}",
                    "--console",
                    ctx.console_url,
                    "--state-dir",
                    str(ctx.data_dir / "agents" / node["name"]),
                ],
                env={"TIERGATE_NODE_TOKEN": node["token"]},
                ready_url=f"http://{ctx.host}:{node['agent_port']}/health",
            )
        )
    return specs


def _resolve(path: str) -> Callable[..., Any]:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def run_seeders(ctx: DemoContext) -> list[str]:
    notes: list[str] = []
    for path in DEMO_SEEDERS:
        result = _resolve(path)(ctx)
        if result:
            notes.extend(result if isinstance(result, list) else [str(result)])
    return notes


def process_specs(ctx: DemoContext) -> list[ProcessSpec]:
    specs: list[ProcessSpec] = []
    for path in DEMO_PROCESSES:
        specs.extend(_resolve(path)(ctx))
    return specs
