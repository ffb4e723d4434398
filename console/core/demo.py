"""The processes and data of `manage.py demo` (the README's first command).

Each app adds what it needs to the demo by appending to DEMO_SEEDERS (dotted paths of
functions called once after migrate, given the demo admin) and DEMO_PROCESSES (functions that
return process specs). Keeping the list here means one place says what the demo runs.
"""

from __future__ import annotations

import importlib
import os
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
DEMO_PROCESSES: list[str] = ["console.core.demo.core_processes"]


def core_processes(ctx: DemoContext) -> list[ProcessSpec]:
    python = sys.executable
    return [
        ProcessSpec("web", [python, "manage.py", "runserver", "--noreload", f"{ctx.host}:{ctx.port}"],
                    ready_url=f"{ctx.console_url}/healthz?worker=0"),
        ProcessSpec("worker", [python, "-m", "celery", "-A", "console", "worker", "--beat",
                               "--loglevel", "INFO", "--concurrency", str(min(4, os.cpu_count() or 2)),
                               "--schedule", str(ctx.data_dir / "celerybeat-schedule")]),
    ]


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
