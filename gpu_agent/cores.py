"""Which cores a CPU vLLM's threads hold, and whether they leave the agent one (docs/gateway.md,
"Keeping off the engine's cores"): what a managed engine's environment asks for, and what the
engine's threads are bound to, read from /proc (gpu_agent.core_keeper acts on it).

vLLM's CPU build binds one OpenMP thread to each core named in VLLM_CPU_OMP_THREADS_BIND
(ranks separated by "|", cores as "0-3,5"). Its default, "auto", takes every core but those it
reserves for its other processes: VLLM_CPU_NUM_OF_RESERVED_CPU, by default one a rank on x86
and Arm (vllm/utils/ompmultiprocessing.py). The agent then shares the reserved core with
vLLM's API server and engine-core process. Where the threads hold every core the agent may
run on, any process beside the engine (the gateway, a bare relay, nginx alike) costs the
engine a tenth to a seventh of its steps on two cores (docs/gateway.md, "Keeping off the
engine's cores"): a managed agent says so at start and in its status. vLLM's GPU builds ignore both
variables, so an engine that sets neither has nothing to report.

Where they do hold every core, the agent also starts the engine with `OMP_WAIT_POLICY=PASSIVE`
unless the operator set a policy (`engine_env`). vLLM's CPU build runs PyTorch's GNU OpenMP,
whose threads by default spin while they wait for each other and for the next step: on cores
the engine shares, a spinning thread holds the core that the gateway, the client and vLLM's
own API server and engine-core process need, and whoever takes it stops a thread that the
others then wait for. With the passive policy a waiting thread sleeps and gives its core up
(docs/performance.md, "Headline on a real vLLM"; lab/NOTES.md, "Cores, on CPU-only nodes").
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

BIND = "VLLM_CPU_OMP_THREADS_BIND"
RESERVED = "VLLM_CPU_NUM_OF_RESERVED_CPU"
WAIT_POLICY = "OMP_WAIT_POLICY"


def parse_cpus(text: str) -> set[int]:
    """Cores named by a binding: "0-3,5|6-7" -> {0, 1, 2, 3, 5, 6, 7}; ValueError if
    unreadable."""
    cores: set[int] = set()
    for rank in text.split("|"):
        for part in rank.split(","):
            part = part.strip()
            if not part:
                raise ValueError(f"{BIND}={text!r}: an empty core list")
            first, _, last = part.partition("-")
            lo, hi = int(first), int(last or first)
            if lo < 0 or hi < lo:
                raise ValueError(f"{BIND}={text!r}: {part!r} is not a core range")
            cores.update(range(lo, hi + 1))
    return cores


def engine_cores(env: Mapping[str, str], agent_cpus: Iterable[int]) -> dict[str, Any]:
    """What `env` tells vLLM's CPU build to bind, and whether that leaves the agent (on
    `agent_cpus`) a core: {"omp_bind", "reserved", "leaves_agent_a_core", "warning",
    "engine_env"}. `leaves_agent_a_core` is None where it cannot be told (an unreadable
    binding). `engine_env`: what to add to the engine's environment, `OMP_WAIT_POLICY=PASSIVE`
    where its threads leave the agent no core and `env` sets no policy (the module's
    docstring), else nothing."""
    cpus = set(agent_cpus)
    bind = env.get(BIND, "auto").strip() or "auto"
    reserved = env.get(RESERVED)
    leaves: bool | None
    if len(cpus) < 2:
        leaves = False  # one core: nothing to leave
    elif bind == "auto":
        leaves = reserved is None or _int(reserved, 1) > 0
    elif bind == "nobind":
        leaves = _int(env.get("OMP_NUM_THREADS", ""), len(cpus)) < len(cpus)
    else:
        try:
            leaves = bool(cpus - parse_cpus(bind))
        except ValueError:
            leaves = None
    warning = None
    engine_env: dict[str, str] = {}
    if leaves is False and len(cpus) > 1:
        passive = WAIT_POLICY not in env
        engine_env = {WAIT_POLICY: "PASSIVE"} if passive else {}
        warning = (
            f"{BIND}={bind!r}"
            + (f" with {RESERVED}={reserved}" if bind == "auto" else "")
            + f" leaves the agent none of its cores {named(cpus)}: on vLLM's CPU build every "
            "process beside the engine then costs it some of its steps. Leave one core out "
            f"({BIND}=auto, vLLM's default, does)"
            + (
                f"; the engine starts with {WAIT_POLICY}=PASSIVE, so that its waiting threads "
                "give their cores up"
                if passive
                else f"; {WAIT_POLICY}={env[WAIT_POLICY]!r} is the operator's"
            )
        )
    elif leaves is None:
        warning = f"{BIND}={bind!r} is not a core list vLLM reads"
    return {
        "omp_bind": bind,
        "reserved": reserved,
        "leaves_agent_a_core": leaves,
        "warning": warning,
        "engine_env": engine_env,
    }


def _int(text: str, default: int) -> int:
    try:
        return int(text)
    except ValueError:
        return default


def named(cpus: set[int], at_most: int = 120) -> str:
    """`span(cpus)`, or where that is longer than `at_most` characters, how many and from which
    to which: a warning that names them stays short whatever the node."""
    text = span(cpus)
    return text if len(text) <= at_most else f"({len(cpus)}, from {min(cpus)} to {max(cpus)})"


def span(cpus: set[int]) -> str:
    """Cores as vLLM writes a core list, runs as ranges: {0, 1, 2, 3, 5} -> "0-3,5" (so that a
    warning naming a large node's cores stays short: the heartbeat carries it, docs/protocol.md)."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in runs)


# -- keeping the agent off the engine's OpenMP cores ----------------------------------------
#
# vLLM's CPU build binds each OpenMP thread to one core (OMP_PLACES / GOMP_CPU_AFFINITY / KMP_
# AFFINITY with one core a thread). A thread of the agent that lands on such a core stops that
# thread mid-step while the others wait for it at the step's barrier. So the agent reads which
# cores the engine's threads are bound to, one core each, and keeps its own threads on the
# rest of its cores where there is a rest. Pure reads of /proc, then one sched_setaffinity a
# thread; a GPU engine binds no thread to a core and nothing changes.

PROC = Path("/proc")
TCP_LISTEN = "0A"  # /proc/net/tcp's state of a listening socket


def cpus_allowed(status_text: str) -> set[int] | None:
    """The `Cpus_allowed_list` of a /proc/.../status text, None where it has none."""
    for line in status_text.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return parse_cpus(line.split(":", 1)[1].strip().replace("|", ","))
    return None


def process_tree(pid: int, proc: Path = PROC) -> list[int]:
    """`pid` and every process below it (each thread's `children`), parents first."""
    found, i = [pid], 0
    while i < len(found):
        for task in _listdir(proc / str(found[i]) / "task"):
            text = _read(proc / str(found[i]) / "task" / task / "children")
            found.extend(int(c) for c in text.split() if int(c) not in found)
        i += 1
    return found


def bound_cores(pid: int, proc: Path = PROC) -> set[int]:
    """The cores that threads of `pid`'s process tree are bound to one core each."""
    bound: set[int] = set()
    for p in process_tree(pid, proc):
        for task in _listdir(proc / str(p) / "task"):
            allowed = cpus_allowed(_read(proc / str(p) / "task" / task / "status"))
            if allowed is not None and len(allowed) == 1:
                bound |= allowed
    return bound


def fence_unbound(pid: int, cpus: set[int], proc: Path = PROC) -> dict[int, set[int]]:
    """Keep every thread of `pid`'s process tree that is not bound to one core to those of
    its cores that are in `cpus`: the engine's helpers (API server, engine-core process, the
    workers' threads outside OpenMP) off the cores its OpenMP threads hold. A thread is only
    ever narrowed, never given a core it did not have; one with none of `cpus` is left. Each
    thread moved, with the cores it had."""
    moved: dict[int, set[int]] = {}
    for p in process_tree(pid, proc):
        for task in _listdir(proc / str(p) / "task"):
            allowed = cpus_allowed(_read(proc / str(p) / "task" / task / "status"))
            if allowed is None or len(allowed) == 1 or not allowed & cpus or allowed <= cpus:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(int(task), allowed & cpus)
                moved[int(task)] = allowed
    return moved


def unfence(moved: dict[int, set[int]]) -> None:
    """Give each thread `fence_unbound` moved the cores it had (those gone are skipped)."""
    for tid, cpus in moved.items():
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(tid, cpus)


def listening_pid(port: int, proc: Path = PROC) -> int | None:
    """The process listening on TCP `port` (IPv4 or IPv6), None where none of ours is."""
    inodes = set()
    for table in ("tcp", "tcp6"):
        for line in _read(proc / "net" / table).splitlines()[1:]:
            fields = line.split()  # sl local_address rem_address st ... uid timeout inode
            if len(fields) < 10 or fields[3] != TCP_LISTEN:
                continue
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return None
    for entry in _listdir(proc):
        if not entry.isdigit():
            continue
        for fd in _listdir(proc / entry / "fd"):
            with contextlib.suppress(OSError):
                if os.readlink(proc / entry / "fd" / fd) in inodes:
                    return int(entry)
    return None


LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")  # urlsplit's hostname, brackets dropped


def local_listener(url: str, proc: Path = PROC) -> int | None:
    """The process on this machine serving `url`, None where the URL names another host or
    nobody of ours listens on its port."""
    parts = urlsplit(url)
    if parts.hostname not in LOCAL_HOSTS or parts.port is None:
        return None
    return listening_pid(parts.port, proc)


def keep_off(own: set[int], bound: set[int]) -> set[int]:
    """The cores for the agent: its own less the engine's bound ones, where any are left."""
    return (own - bound) or set(own)


def pin_this_process(cpus: set[int]) -> None:
    """Every thread of this process on `cpus` (threads started later inherit it)."""
    pin_process("self", cpus)


def pin_process(pid: int | str, cpus: set[int]) -> None:
    """Every thread of process `pid` ("self": this one) on `cpus`."""
    for task in _listdir(PROC / str(pid) / "task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(task), cpus)


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
