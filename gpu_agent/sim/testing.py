"""Start a simulator process for tests: ``with run_sim_process() as base_url: ...``."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
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
    extra_args: Sequence[str] = ("--sim-preset", "tiny-test"),
    startup_timeout_s: float = 20.0,
) -> Iterator[str]:
    """Run ``python -m gpu_agent.sim serve MODEL`` on a free port; yield ``http://127.0.0.1:N``.

    The base URL has no ``/v1`` (the OpenAI client wants ``base_url + "/v1"``). The process
    is killed on exit; a process that dies or never answers /health raises RuntimeError with
    its output.
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
        *extra_args,
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_timeout_s
        while True:
            if process.poll() is not None:
                output = process.stdout.read().decode() if process.stdout else ""
                raise RuntimeError(f"simulator exited with {process.returncode}: {output}")
            try:
                if httpx.get(base_url + "/health", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"simulator did not answer /health in {startup_timeout_s} s")
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
        if process.stdout:
            process.stdout.close()
