"""The engine report (docs/protocol.md): the node's engine version and the arguments its own
parser accepts, so the console can check a launch profile against the engine that will run it.

The agent never lists vLLM's flags itself: it runs `engine_probe.py` with the Python of the
engine command (a `python -m vllm.entrypoints...` line, or the interpreter named in the `vllm`
script's first line; the simulator's for `--simulate`), which imports the engine's parser.

    report = await probe_engine(["vllm", "serve", "m", ...])   # None: no Python found
    report["digest"]                                            # what the console echoes
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger("gpu_agent.engine_report")

PROBE = Path(__file__).with_name("engine_probe.py")
# Run the probe file without its folder (or the current one) on sys.path: gpu_agent/types.py
# would shadow the standard library's `types` for the engine's Python.
BOOT = (
    "import runpy, sys; sys.path.pop(0); sys.argv = sys.argv[1:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)
PROBE_TIMEOUT_S = 300.0  # importing vLLM takes seconds on an idle machine, minutes on a busy one


def _is_python(path: str) -> bool:
    return Path(path).name.startswith("python")


def _shebang_python(path: str) -> str | None:
    try:
        with open(path, "rb") as script:
            first = script.readline(400).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if words and Path(words[0]).name == "env" and len(words) > 1:
        words = [shutil.which(words[1]) or words[1], *words[2:]]
    return words[0] if words and _is_python(words[0]) else None


def interpreter_of(command: Sequence[str], path: str | None = None) -> tuple[str, str] | None:
    """(the Python that runs `command`, the engine kind "vllm" or "sim"), or None."""
    if not command:
        return None
    found = shutil.which(command[0], path=path) or command[0]
    if _is_python(found):
        modules = [command[i + 1] for i, a in enumerate(command[:-1]) if a == "-m"]
        kind = "sim" if modules and modules[0].startswith("gpu_agent.sim") else "vllm"
        return found, kind
    python = _shebang_python(found)
    return (python, "vllm") if python else None


def digest_of(report: Mapping[str, Any]) -> str:
    body = {k: v for k, v in report.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


async def probe_engine(
    command: Sequence[str], env: Mapping[str, str] | None = None
) -> dict[str, Any] | None:
    """The report for `command` (its "error" set when the probe failed), or None when no
    Python could be told from it (an engine that is not a Python program)."""
    environ = dict(env or os.environ)
    found = interpreter_of(command, environ.get("PATH"))
    if found is None:
        return None
    python, kind = found
    report: dict[str, Any]
    try:
        process = await asyncio.create_subprocess_exec(
            python,
            "-c",
            BOOT,
            str(PROBE),
            "describe",
            kind,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=environ,
        )
        out, err = await asyncio.wait_for(process.communicate(), PROBE_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        report = {"engine": kind, "error": f"cannot read the engine's arguments: {exc}"}
    else:
        lines = out.decode("utf-8", "replace").strip().splitlines()
        try:
            report = json.loads(lines[-1]) if process.returncode == 0 and lines else {}
        except ValueError:
            report = {}
        if not isinstance(report, dict) or "options" not in report:
            tail = err.decode("utf-8", "replace").strip().splitlines()[-3:]
            report = {
                "engine": kind,
                "error": f"the engine's argument parser did not load: {' '.join(tail)}"[:2000],
            }
    report["python"] = python
    report["digest"] = digest_of(report)
    if "error" in report:
        log.warning("%s", report["error"])
    return report
