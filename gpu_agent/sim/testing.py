"""Start a simulator process for tests: ``with run_sim_process() as base_url: ...``."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def run_sim_process(
    model: str = "demo",
    extra_args: Sequence[str] = (),
    *,
    preset: str | None = "tiny-test",
    startup_timeout_s: float = 20.0,
) -> Iterator[str]:
    """Run ``python -m gpu_agent.sim serve MODEL`` on a free port; yield ``http://127.0.0.1:N``.

    `extra_args` are any further flags (``["--max-num-seqs", "4", "--scheduling-policy",
    "priority"]``). `preset` picks ``--sim-preset`` (the fast ``tiny-test`` by default; None
    leaves the simulator's default, an 8B model on an H100). The base URL has no ``/v1``: the
    OpenAI client wants ``base_url + "/v1"``. The process is stopped on exit; one that dies or
    never answers /health raises RuntimeError with its output.
    """
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "gpu_agent.sim",
        "serve",
        model,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    if preset is not None:
        command += ["--sim-preset", preset]
    command += list(extra_args)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    base_url = f"http://127.0.0.1:{port}"
    # A file, not a pipe: nobody reads the output while the server runs, and a full pipe blocks.
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env)

        def failure(reason: str) -> RuntimeError:
            output.seek(0)
            return RuntimeError(f"{reason}: {output.read().decode(errors='replace')}")

        try:
            deadline = time.monotonic() + startup_timeout_s
            while True:
                if process.poll() is not None:
                    raise failure(f"simulator exited with {process.returncode}")
                try:
                    if httpx.get(base_url + "/health", timeout=1.0).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise failure(f"simulator did not answer /health in {startup_timeout_s} s")
                time.sleep(0.05)
            yield base_url
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
