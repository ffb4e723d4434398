"""Engine supervisor (managed mode, docs/architecture.md#rollouts-and-rollbacks): runs
`vllm serve ...` (or the simulator with the same flags), swaps launch profiles and rolls back a
profile that does not come up.

`restart(argv)` stops the running engine, starts the new command line and waits for /health.
If the new engine exits or stays silent past the timeout, the previous command line is started
again and `EngineStartError` carries the tail of the failed engine's output, which the
reconciler reports to the console. An engine that dies on its own is restarted with a capped
backoff. The engine runs `nice` steps nicer than the agent (`--engine-nice`, default
DEFAULT_ENGINE_NICE), so that where they share cores the gateway comes first.

`report` is the engine report (gpu_agent.engine_report): the version and accepted arguments of
the engine the command line runs, read from its own parser in the background at start and
again whenever a new command line runs another interpreter.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import sys
from collections import deque
from collections.abc import Callable
from typing import Any

import httpx

from gpu_agent.cores import engine_cores
from gpu_agent.engine_report import interpreter_of, probe_engine

log = logging.getLogger("gpu_agent.supervisor")

TAIL_LINES = 30
_STOP_GRACE_S = 10.0
# How much nicer than the agent the engine runs (`--engine-nice`,
# docs/architecture.md#rollouts-and-rollbacks). Where the two share cores, the gateway's hop and the
# first-token times its admission limit reads come first: vLLM's CPU build spins an OpenMP thread on
# every core it is given, and a gateway that gets only what is left sees first tokens late and
# relays them late. The gateway needs little CPU, so the engine keeps nearly all of it; on a GPU
# node with cores to spare it changes nothing. Raising niceness needs no privilege; 0 runs the
# engine as the agent.
DEFAULT_ENGINE_NICE = 10
# Why the engine stays in the agent's session (a process group of its own, not `setsid`):
# with the kernel's autogroups (kernel.sched_autogroup_enabled, on by default in Debian's and
# Ubuntu's kernels) every session is a scheduling group of its own, the groups share the CPU
# equally, and niceness only orders the threads inside one group. An engine in a session of
# its own would take half the cores from the agent whatever its niceness (measured: a niced-10
# spinner beside a nice-0 one got 0.50 of the core from a session of its own, 0.16-0.17 from
# the same session).


def _die_with_parent() -> None:
    """On Linux, have the kernel send this process SIGTERM when the agent dies, even by
    SIGKILL, so no orphan engine keeps the port."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def engine_preexec(nice: int) -> Callable[[], None]:
    """What runs in the engine's child process before exec: dies with the agent, leads a
    process group of its own (stopping it stops its workers) in the agent's session, where its
    niceness acts (see above DEFAULT_ENGINE_NICE; uvloop has no `process_group`), and runs
    `nice` steps nicer than the agent (inherited by every thread and process it starts)."""

    def preexec() -> None:
        _die_with_parent()
        os.setpgid(0, 0)
        if nice:
            os.nice(nice)

    return preexec


class EngineStartError(RuntimeError):
    """The engine did not come up; the message holds the reason and its output's tail."""


def engine_argv(argv: list[str], simulate: bool) -> list[str]:
    """The command to run: with `simulate`, `vllm serve ...` becomes the simulator."""
    if simulate and argv[:2] == ["vllm", "serve"]:
        return [sys.executable, "-m", "gpu_agent.sim", "serve", *argv[2:]]
    return list(argv)


def _flag_value(argv: list[str], flag: str) -> str | None:
    value = None
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value


def engine_url_of(argv: list[str]) -> str:
    """vLLM's defaults: 0.0.0.0 (reached here as 127.0.0.1) and port 8000."""
    host = _flag_value(argv, "--host") or "127.0.0.1"
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    port = _flag_value(argv, "--port") or "8000"
    return f"http://{host}:{port}"


def with_endpoint(argv: list[str], host: str | None, port: str | None) -> list[str]:
    """`argv` with the node's own --host/--port in place of any the launch profile names.

    Where the engine listens is a fact of the node (several nodes may share a host, and the
    agent must find its engine), not of the launch profile rolled out to many nodes."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in ("--host", "--port") and (host if arg == "--host" else port) is not None:
            skip = True
            continue
        if (
            arg.startswith(("--host=", "--port="))
            and (host if arg.startswith("--host") else port) is not None
        ):
            continue
        out.append(arg)
    if host is not None:
        out += ["--host", host]
    if port is not None:
        out += ["--port", port]
    return out


def launch_args(argv: list[str]) -> dict[str, Any]:
    """A command line to launch args.

    `vllm serve MODEL --max-num-seqs 64 --enable-x` -> {"model": ..., "max_num_seqs": 64, ...}
    """
    args: dict[str, Any] = {}
    rest = argv[2:] if argv[:2] == ["vllm", "serve"] else argv[1:]
    i = 0
    while i < len(rest):
        arg = rest[i]
        if not arg.startswith("--"):
            args.setdefault("model", arg)
            i += 1
            continue
        name, _, inline = arg[2:].partition("=")
        key = name.replace("-", "_")
        if inline:
            value: Any = inline
        elif i + 1 < len(rest) and not rest[i + 1].startswith("--"):
            value = rest[i + 1]
            i += 1
        elif key.startswith("no_"):
            key, value = key[3:], False
        else:
            value = True
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                value = float(value) if "." in value else int(value)
        args[key] = value
        i += 1
    return args


class EngineSupervisor:
    def __init__(
        self,
        argv: list[str],
        simulate: bool,
        start_timeout_s: float = 300.0,
        nice: int = DEFAULT_ENGINE_NICE,
    ) -> None:
        # The engine address given at start-up stays the node's for every later profile.
        self._host = _flag_value(argv, "--host")
        self._port = _flag_value(argv, "--port")
        self._set_argv(list(argv))
        self.simulate = simulate
        self.start_timeout_s = start_timeout_s
        self.nice = nice
        self.state = "down"  # down | starting | ok
        self.detail = ""
        self._process: asyncio.subprocess.Process | None = None
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._reader: asyncio.Task[None] | None = None
        self._monitor: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._closing = False
        self.report: dict[str, Any] | None = None
        self._report_of: tuple[str, str] | None = None
        self._report_task: asyncio.Task[None] | None = None
        # Where vLLM's CPU build will bind its OpenMP threads, read from the environment the
        # engine inherits (gpu_agent.cores); None for the simulator, which has none.
        self.cores = None if simulate else engine_cores(os.environ, os.sched_getaffinity(0))

    @property
    def argv(self) -> list[str]:
        return self._argv

    @argv.setter
    def argv(self, argv: list[str]) -> None:
        """Any command line set from outside (a profile, the saved state) keeps the node's
        own engine address."""
        self._set_argv(with_endpoint(argv, self._host, self._port))

    def _set_argv(self, argv: list[str]) -> None:
        # Parsed once per change, not per request (the gateway reads both on every request).
        self._argv = argv
        self._engine_url = engine_url_of(argv)
        self._args = launch_args(argv)

    @property
    def engine_url(self) -> str:
        return self._engine_url

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def args(self) -> dict[str, Any]:
        return self._args

    async def start(self) -> None:
        if self.cores is not None and self.cores["warning"]:
            log.warning("engine cores: %s", self.cores["warning"])
        self._refresh_report(self.argv)
        async with self._lock:
            await self._start(self.argv)

    def _refresh_report(self, argv: list[str]) -> None:
        """Read the engine report in the background when `argv` runs another interpreter."""
        command = engine_argv(argv, self.simulate)
        found = interpreter_of(command)
        if found == self._report_of and self.report is not None:
            return
        self._report_of = found

        async def probe() -> None:
            report = await probe_engine(command)
            if self._report_of == found:
                self.report = report

        if self._report_task is not None:
            self._report_task.cancel()
        self._report_task = asyncio.create_task(probe(), name="engine-report")

    def runs(self, argv: list[str]) -> bool:
        """Whether the engine already runs `argv` (its flags in any order, the node's own
        address): a profile adopted from this engine needs no restart."""
        wanted = launch_args(with_endpoint(argv, self._host, self._port))
        return wanted == launch_args(self._argv)

    async def restart(self, argv: list[str]) -> None:
        """Swap to `argv`; on failure go back to the previous command line and raise."""
        argv = with_endpoint(argv, self._host, self._port)
        async with self._lock:
            previous = self._argv
            self._refresh_report(argv)
            await self._stop()
            try:
                await self._start(argv)
            except EngineStartError as exc:
                log.warning("new launch profile failed, going back: %s", exc)
                await self._stop()
                try:
                    await self._start(previous)
                except EngineStartError as again:
                    self.detail = f"previous profile failed too: {again}"
                self._refresh_report(previous)
                raise
            self._set_argv(argv)

    async def aclose(self) -> None:
        self._closing = True
        if self._report_task is not None:
            self._report_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._report_task
        async with self._lock:
            await self._stop()

    # -- internals ------------------------------------------------------------------------

    async def _start(self, argv: list[str]) -> None:
        command = engine_argv(argv, self.simulate)
        self.state = "starting"
        self._tail.clear()
        log.info("starting engine: %s", " ".join(command))
        try:
            process = await asyncio.create_subprocess_exec(
                *command,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                preexec_fn=engine_preexec(self.nice),
                # Dev mode opens vLLM's POST /reset_prefix_cache, which benchmarks use
                # (docs/protocol.md); an operator's VLLM_SERVER_DEV_MODE=0 wins. On cores it
                # shares with the agent, its OpenMP threads wait passively (gpu_agent.cores).
                env={
                    "VLLM_SERVER_DEV_MODE": "1",
                    **(self.cores["engine_env"] if self.cores else {}),
                    **os.environ,
                    "PYTHONUNBUFFERED": "1",
                },
            )
        except OSError as exc:
            self.state = "down"
            self.detail = f"cannot run {command[0]!r}: {exc}"
            raise EngineStartError(self.detail) from exc
        self._process = process
        self._reader = asyncio.create_task(self._read_output(process))
        try:
            await self._wait_healthy(process, engine_url_of(argv))
        except EngineStartError as exc:
            self.state = "down"
            self.detail = str(exc)
            await self._stop()
            raise
        self.state = "ok"
        self.detail = ""
        self._monitor = asyncio.create_task(self._watch_exit(process, argv))

    async def _wait_healthy(self, process: asyncio.subprocess.Process, url: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.start_timeout_s
        async with httpx.AsyncClient(timeout=1.0) as client:
            while True:
                if process.returncode is not None:
                    if self._reader is not None:  # let the last lines arrive
                        with contextlib.suppress(asyncio.TimeoutError):
                            await asyncio.wait_for(asyncio.shield(self._reader), 1.0)
                    raise EngineStartError(
                        f"engine exited with code {process.returncode}: {self.tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(url + "/health")).status_code == 200:
                        return
                if loop.time() > deadline:
                    raise EngineStartError(
                        f"engine did not answer {url}/health within {self.start_timeout_s:g} s: "
                        f"{self.tail()}"
                    )
                await asyncio.sleep(0.1)

    def tail(self) -> str:
        return "\n".join(self._tail)

    async def _read_output(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        async for raw in process.stdout:
            line = raw.decode("utf-8", "replace").rstrip()
            self._tail.append(line)
            log.debug("engine: %s", line)

    async def _watch_exit(self, process: asyncio.subprocess.Process, argv: list[str]) -> None:
        code = await process.wait()
        if self._closing or process is not self._process:
            return
        self.state = "down"
        self.detail = f"engine exited with code {code}: {self.tail()}"
        log.error("%s", self.detail)
        delay = 1.0
        while not self._closing:
            await asyncio.sleep(delay)
            async with self._lock:
                if self._process is not process:
                    return  # a restart already replaced it
                try:
                    await self._start(argv)
                    return
                except EngineStartError as exc:
                    log.error("engine restart failed: %s", exc)
            delay = min(delay * 2, 30.0)

    async def _stop(self) -> None:
        process, self._process = self._process, None
        monitor, self._monitor = self._monitor, None
        if monitor is not None and monitor is not asyncio.current_task():
            monitor.cancel()
        if process is None:
            return
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), _STOP_GRACE_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
        if self._reader is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._reader, 1.0)
            self._reader = None
        self.state = "down"
