"""Helpers of the rollout tests: real agents (subprocesses) heartbeating to the live test
console, the executor run in a thread, and steady traffic through the gateways."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx

from gpu_agent.testing import AgentProcess

ROOT = Path(__file__).resolve().parents[2]
MODEL = "demo"
# The rollout defaults (a 60 s canary soak, an SLO guard) are for operators; tests that are not
# about them say so, and stay fast.
QUICK: dict[str, Any] = {
    "canary_soak_s": 0.0,
    "guard_max_ttft_p99_regression_pct": None,
    "guard_max_error_rate": None,
}


def queue(priority: int, wait_ms: int = 1, batch: int = 8) -> dict[str, Any]:
    return {
        "max_batch_size": batch,
        "max_waiting_time_ms": wait_ms,
        "max_tokens_per_batch": 1_000_000,
        "priority": priority,
    }


def tier_config(online_wait_ms: int = 1, online_batch: int = 8) -> dict[str, Any]:
    return {
        "scheduler": {
            "queues": {
                "online": queue(1, online_wait_ms, online_batch),
                "batch": queue(2),
                "offline": queue(3),
            }
        }
    }


class Agent(AgentProcess):
    """An agent the live test console manages; `node_token` is the node's token."""

    def applied(self, kind: str = "tier_config") -> int | None:
        value: int | None = self.status()["applied"][kind]
        return value


def spawn_agent(
    name: str,
    token: str,
    console_url: str,
    tmp: Path,
    *,
    engine_url: str | None = None,
    engine_cmd: str | None = None,
) -> Agent:
    """Start `python -m gpu_agent` managed by the console, attached to `engine_url` or running
    `engine_cmd` as the simulator; `Agent.wait_ready` waits for its gateway."""
    engine = (
        ["--engine-url", engine_url]
        if engine_url
        else ["--engine-cmd", str(engine_cmd), "--simulate", "--engine-start-timeout", "15"]
    )
    args = [
        *engine,
        "--console",
        console_url,
        "--state-dir",
        str(tmp / f"state-{name}"),
        "--heartbeat-backoff-max",
        "1",
        "--log-level",
        "warning",
    ]
    return Agent.spawn(
        args, tmp / f"agent-{name}.log", env={"TIERGATE_NODE_TOKEN": token}, node_token=token
    )


class ExecutorThread(threading.Thread):
    """The Celery task's body, run in this process: what a worker would do, minus the broker."""

    def __init__(self, rollout_id: int) -> None:
        super().__init__(daemon=True, name=f"rollout-{rollout_id}")
        self.rollout_id = rollout_id
        self.result: str | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        from django.db import connections

        from console.tuning.rollouts.executor import execute

        try:
            self.result = execute(self.rollout_id, poll_s=0.1)
        except BaseException as exc:  # reported by finish()
            self.error = exc
        finally:
            connections.close_all()

    def finish(self, timeout: float = 40.0) -> str:
        self.join(timeout)
        if self.is_alive():
            raise AssertionError(f"rollout {self.rollout_id} still running after {timeout} s")
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


def run_rollout(rollout: Any, timeout: float = 40.0) -> Any:
    """Execute the rollout to its end in a thread; return it reloaded."""
    thread = ExecutorThread(rollout.pk)
    thread.start()
    thread.finish(timeout)
    rollout.refresh_from_db()
    return rollout


def timeline(rollout: Any) -> str:
    return "\n".join(e.message for e in rollout.events.order_by("ts", "id"))


def stream_completion(client: httpx.Client, url: str, key: str, max_tokens: int) -> tuple[int, str]:
    """One streamed completion through a gateway: (status, the whole body)."""
    body = {
        "model": MODEL,
        "prompt": "hello rollout",
        "max_tokens": max_tokens,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }
    with client.stream(
        "POST", url + "/v1/completions", json=body, headers={"Authorization": f"Bearer {key}"}
    ) as response:
        text = "".join(response.iter_text())
        return response.status_code, text


class Load:
    """Steady streamed traffic through some gateways from a few threads, until stopped."""

    def __init__(
        self, urls: list[str], key: str, workers_per_url: int = 4, max_tokens: int = 4
    ) -> None:
        self.urls, self.key, self.max_tokens = urls, key, max_tokens
        self.stop_event = threading.Event()
        self.ok = 0
        self.failed: list[str] = []
        self._lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self._loop, args=(url,), daemon=True)
            for url in urls
            for _ in range(workers_per_url)
        ]

    def _loop(self, url: str) -> None:
        with httpx.Client(timeout=30) as client:
            while not self.stop_event.is_set():
                try:
                    status, text = stream_completion(client, url, self.key, self.max_tokens)
                except httpx.HTTPError as exc:
                    status, text = 0, repr(exc)
                with self._lock:
                    if status == 200 and "[DONE]" in text:
                        self.ok += 1
                    else:
                        self.failed.append(f"{status}: {text[:200]}")

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        for thread in self.threads:
            thread.join(30)


class InlineWorker(threading.Thread):
    """Executes every unfinished rollout no one holds, as a Celery worker would (the broker's
    message is redundant with this; a lease keeps the two from running one rollout twice)."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="inline-rollout-worker")
        self.stop_event = threading.Event()

    def run(self) -> None:
        from django.db import connections

        from console.tuning.rollouts.executor import execute
        from console.tuning.rollouts.tasks import orphaned_rollouts

        try:
            while not self.stop_event.wait(0.1):
                for rollout_id in orphaned_rollouts():
                    execute(rollout_id, poll_s=0.1)
        finally:
            connections.close_all()

    def stop(self) -> None:
        self.stop_event.set()
        self.join(30)
