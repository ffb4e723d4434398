"""The processes of an arm: an engine (the simulator, or a real vLLM) and, for gateway arms, the
Tiergate gateway (`python -m gpu_agent` standalone; the console never imports gpu_agent, it
starts it).

All are real subprocesses on 127.0.0.1, started fresh for every arm so that no arm inherits
another's prefix cache, counters or queue state. Their output goes to files in the run's work
folder (a pipe nobody reads would block them); a process that dies or never answers /health
raises with the tail of its log.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

# The folder that holds the product's packages (the checkout, /app in the image, or
# site-packages once installed): `python -m gpu_agent` resolves from there.
ROOT = Path(__file__).resolve().parents[3]
# A gateway key for the experiment only: the process listens on loopback for one arm.
GATEWAY_KEY = "tgk_headline_" + "0123456789abcdef" * 3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return ""


def _wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: exited with {proc.returncode}:\n{_tail(log)}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url + "/health", timeout=1.0).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url}: no healthy /health in {timeout_s:.0f} s:\n{_tail(log)}")
        time.sleep(0.05)


def _nicer(nice: int) -> Callable[[], None] | None:
    """What the child runs before exec to be `nice` steps nicer (None: as it is)."""
    if not nice:
        return None

    def preexec() -> None:
        os.nice(nice)

    return preexec


@contextlib.contextmanager
def process(
    argv: Sequence[str],
    log: Path,
    url: str,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    nice: int = 0,
    cwd: Path = ROOT,
) -> Iterator[str]:
    """`argv` as a process of its own, its output to `log`, until `url`/health answers 200
    (within `timeout_s`); yields `url` and stops the process (its whole group) after.
    `nice`: started that much nicer than this process (its threads and children too);
    `cwd`: where `python -m` resolves the product's packages from."""
    env = {**(env or os.environ), "PYTHONUNBUFFERED": "1"}
    with open(log, "wb") as out:
        # Its own process group (a real vLLM's engine-core process stops with it), in this
        # process's session: in a session of its own, the kernel's autogroups would make it a
        # scheduling group of its own, and the engine's niceness would not act against the
        # load generator and the gateway (gpu_agent.supervisor, above DEFAULT_ENGINE_NICE).
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            process_group=0,
            preexec_fn=_nicer(nice),
        )
        try:
            _wait_healthy(proc, url, log, timeout_s)
            yield url
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def sim_argv(model: str, port: int, flags: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "gpu_agent.sim", "serve", model, "--port", str(port), *flags]


# A real vLLM takes minutes to start on a busy CPU (torch import, model load, warm-up).
VLLM_START_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class VllmEngine:
    """How to start a real vLLM: `COMMAND serve MODEL --host 127.0.0.1 --port N FLAGS`.

    `command` is `vllm` on a node with vLLM installed; lab.headline passes the CPU build of
    tools/vllm_env.py (its shim pins itself to `engine_cpus`). `engine_cpus` are the cores the
    engine keeps to ("0,1"; empty: none): the load generator and the gateways keep off them.
    `nice`: the engine runs that much nicer than the load generator and the gateways, as the
    agent's supervisor starts it (its `--engine-nice`, options.ENGINE_NICE), in every arm."""

    command: tuple[str, ...] = ("vllm",)
    model: str = ""
    env: Mapping[str, str] | None = None
    engine_cpus: str = ""
    description: str = ""
    nice: int = 0

    def argv(self, port: int, flags: Sequence[str]) -> list[str]:
        host = ["--host", "127.0.0.1", "--port", str(port)]
        return [*self.command, "serve", self.model, *host, *flags]

    def describe(self) -> str:
        return self.description or f"real vLLM ({' '.join(self.command)} serve {self.model})"


def cpu_set(cpus: str) -> set[int]:
    return {int(c) for c in cpus.split(",") if c.strip()}


@contextlib.contextmanager
def run_engine(
    model: str,
    flags: Sequence[str],
    workdir: Path,
    name: str,
    vllm: VllmEngine | None = None,
) -> Iterator[str]:
    """``python -m gpu_agent.sim serve MODEL FLAGS``, or with `vllm` that real vLLM (FLAGS name
    the served model `model`); yields its base URL (no /v1)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = workdir / f"{name}-engine.log"
    if vllm is not None:
        argv = vllm.argv(port, flags)
        with process(argv, log, url, VLLM_START_TIMEOUT_S, vllm.env, vllm.nice) as u:
            yield u
        return
    with process(sim_argv(model, port, flags), log, url, 30) as u:
        yield u


def gateway_argv(
    engine_url: str, tier_config: dict[str, Any], workdir: Path, name: str
) -> tuple[list[str], str]:
    """The agent's command line in standalone mode in front of `engine_url`, with its tier
    config and one all-tier key (GATEWAY_KEY) written to files in `workdir`; and its URL."""
    workdir = workdir.resolve()  # the process may start elsewhere (process's `cwd`)
    config_path = workdir / f"{name}-tiers.json"
    config_path.write_text(json.dumps(tier_config, indent=2), encoding="utf-8")
    tiers = sorted(tier_config["scheduler"]["queues"])
    keys_path = workdir / f"{name}-keys.json"
    default = min(tiers, key=lambda t: tier_config["scheduler"]["queues"][t]["priority"])
    keys = [{"name": "headline", "key": GATEWAY_KEY, "tiers": tiers, "default_tier": default}]
    keys_path.write_text(json.dumps(keys), encoding="utf-8")
    port = free_port()
    argv = [
        sys.executable, "-m", "gpu_agent",
        "--engine-url", engine_url,
        "--listen", f"127.0.0.1:{port}",
        "--tier-config", str(config_path),
        "--keys", str(keys_path),
        "--state-dir", str(workdir / f"{name}-state"),
        "--log-level", "warning",
    ]  # fmt: skip
    return argv, f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def run_gateway(
    engine_url: str, tier_config: dict[str, Any], workdir: Path, name: str
) -> Iterator[str]:
    """The agent in standalone mode in front of `engine_url` (gateway_argv); yields its URL."""
    argv, url = gateway_argv(engine_url, tier_config, workdir, name)
    with process(argv, workdir / f"{name}-gateway.log", url, 30) as u:
        yield u
