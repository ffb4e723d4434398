"""Real Celery worker processes for tests that need more than the shared one (tests/conftest.py):
several at once, on queues of their own, with extra environment, killable one by one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT, test_database_url


@dataclass
class Worker:
    hostname: str
    queues: list[str]
    process: subprocess.Popen[bytes]
    log_path: Path

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Until this very worker answers a ping sent to its first queue."""
        from console.core.tasks import ping

        deadline = time.monotonic() + timeout_s
        while True:
            try:
                ping.apply_async(queue=self.queues[0], expires=10).get(timeout=2)
                return
            except Exception:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"worker {self.hostname} did not start:\n{self.output()}"
                    ) from None

    def kill(self) -> None:
        """SIGKILL the whole process group: the worker gets no chance to hand anything back."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


def discard(workers: list[Worker]) -> None:
    """End the workers a test is done with: SIGKILL. A warm shutdown would wait for running
    tasks, which the test has waited for already, and takes seconds on the filesystem broker
    (its loop looks for the signal between waits of up to 2 s for a message)."""
    for worker in workers:
        worker.kill()


def start_worker(
    name: str,
    queues: list[str],
    log_dir: Path,
    *,
    env: dict[str, str] | None = None,
    concurrency: int = 2,
) -> Worker:
    """`celery -A console worker` on `queues`, writing to the test database; call wait_ready.
    Call inside a test that has `transactional_db` (the database URL is read from it)."""
    hostname = f"{name}-{os.getpid()}@%h"
    log_path = log_dir / f"{name}.log"
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "console",
        "worker",
        "--pool",
        "threads",
        "--concurrency",
        str(concurrency),
        "--loglevel",
        "INFO",
        "--without-mingle",
        "--without-gossip",
        "--hostname",
        hostname,
        "-Q",
        ",".join(queues),
    ]
    full_env = {**os.environ, "DATABASE_URL": test_database_url(), **(env or {})}
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Worker(hostname, queues, process, log_path)
