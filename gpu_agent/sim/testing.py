"""Start a simulator process for tests: ``with run_sim_process() as base_url: ...``; and the
free port and /health wait that gpu_agent.testing uses for agents too."""

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


def wait_healthy(
    base_url: str, process: subprocess.Popen[bytes], timeout_s: float, name: str
) -> str | None:
    """Poll ``base_url/health`` until it answers 200 (None), `process` exits or `timeout_s`
    passes (what went wrong, e.g. "simulator exited with 2", for the caller to add output to)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            return f"{name} exited with {process.returncode}"
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(base_url + "/health", timeout=1.0).status_code == 200:
                return None
        if time.monotonic() > deadline:
            return f"{name} did not answer /health in {timeout_s} s"
        time.sleep(0.05)


@contextlib.contextmanager
def run_sim_process(
    model: str = "demo",
    extra_args: Sequence[str] = (),
    *,
    preset: str | None = "tiny-test",
    startup_timeout_s: float = 20.0,
    cpus: set[int] | None = None,
) -> Iterator[str]:
    """Run ``python -m gpu_agent.sim serve MODEL`` on a free port; yield ``http://127.0.0.1:N``.

    `extra_args` are any further flags (``["--max-num-seqs", "4", "--scheduling-policy",
    "priority"]``). `preset` picks ``--sim-preset`` (the fast ``tiny-test`` by default; None
    leaves the simulator's default, an 8B model on an H100); `cpus` pins the process to those
    cores (benchmarks keep server and client apart). The base URL has no ``/v1``: the
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
        if cpus is not None:
            os.sched_setaffinity(process.pid, cpus)

        def failure(reason: str) -> RuntimeError:
            output.seek(0)
            return RuntimeError(f"{reason}: {output.read().decode(errors='replace')}")

        try:
            problem = wait_healthy(base_url, process, startup_timeout_s, "simulator")
            if problem is not None:
                raise failure(problem)
            yield base_url
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
