"""Start the agent (``python -m gpu_agent``) as a subprocess for tests and wait for /health.

``with start_agent_process(args, log_path) as agent: httpx.get(agent.url + "/health")``.
The agent listens on a free 127.0.0.1 port (``--listen`` is added here); `args` are the rest
of its command line, as an operator would write them. Its output goes to `log_path`, so a test
that fails can show it (``agent.output()``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import httpx

from gpu_agent.sim.testing import free_port, wait_healthy

# Where `python -m gpu_agent` finds this very package, installed or not.
ROOT = Path(__file__).resolve().parents[1]


@dataclass
class AgentProcess:
    url: str  # http://127.0.0.1:PORT, no trailing slash
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    # What /agent/v1/status wants. Only presented here: the caller hands it to the agent
    # itself (--node-token or TIERGATE_NODE_TOKEN).
    node_token: str | None = None

    @classmethod
    def spawn(
        cls,
        args: Sequence[str],
        log_path: Path,
        *,
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        node_token: str | None = None,
    ) -> Self:
        """Start the agent and return at once; `wait_ready` waits for its /health.

        Starting several and then waiting for each lets them boot in parallel."""
        port = port or free_port()
        command = [sys.executable, "-m", "gpu_agent", "--listen", f"127.0.0.1:{port}", *args]
        # A file, not a pipe: nobody reads the output while the agent runs, and a full pipe blocks.
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                command,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            )
        return cls(f"http://127.0.0.1:{port}", port, process, log_path, node_token)

    def wait_ready(self, timeout_s: float = 20.0) -> Self:
        """Wait until /health answers 200. An agent that exits first, or is still silent after
        `timeout_s` (it is stopped then), raises RuntimeError with its output."""
        problem = wait_healthy(self.url, self.process, timeout_s, f"agent {self.url}")
        if problem is not None:
            self.stop()
            raise RuntimeError(f"{problem}:\n{self.output()}")
        return self

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def status(self) -> dict[str, Any]:
        """GET /agent/v1/status with the node token."""
        headers = {"Authorization": f"Bearer {self.node_token}"} if self.node_token else {}
        response = httpx.get(self.url + "/agent/v1/status", headers=headers, timeout=5)
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    def kill(self) -> None:
        """SIGKILL: the agent gets no chance to shut down in order."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, as an operator would stop it; SIGKILL if it has not exited in `timeout_s`."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_agent_process(
    args: Sequence[str],
    log_path: Path,
    *,
    port: int | None = None,
    env: Mapping[str, str] | None = None,
    node_token: str | None = None,
    timeout_s: float = 20.0,
) -> AgentProcess:
    """Start the agent and wait for its /health (see `AgentProcess.wait_ready`). Used in a
    ``with`` block, it is stopped on the way out; otherwise call `stop`."""
    agent = AgentProcess.spawn(args, log_path, port=port, env=env, node_token=node_token)
    return agent.wait_ready(timeout_s)
