"""The agent keeps its threads off the cores an engine's threads are bound to one each
(gpu_agent.cores, gpu_agent.core_keeper): read from a /proc laid out by hand, and from real
processes, an engine pinned to core 0 found by its pid (managed) and by its port (attached)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu_agent.core_keeper import FIRST_CHECK_S
from gpu_agent.cores import (
    bound_cores,
    cpus_allowed,
    fence_unbound,
    keep_off,
    listening_pid,
    local_listener,
    process_tree,
    unfence,
)
from gpu_agent.sim.testing import free_port
from gpu_agent.testing import start_agent_process
from tests.agent.agent_helpers import NODE_TOKEN, standalone_args, tier_config
from tests.waiting import wait_answering, wait_for


def _task(proc: Path, pid: int, tid: int, cpus: str, children: str = "") -> None:
    task = proc / str(pid) / "task" / str(tid)
    task.mkdir(parents=True)
    (task / "status").write_text(f"Name:\tx\nCpus_allowed:\t3\nCpus_allowed_list:\t{cpus}\n")
    (task / "children").write_text(children)


def test_the_cores_bound_one_each_below_the_engine(tmp_path: Path) -> None:
    # API server 10 (both cores) -> engine core 11 (both) -> worker 12, whose OpenMP threads
    # are bound to core 0 and whose main thread floats; 20 is another process altogether.
    _task(tmp_path, 10, 10, "0-1", "11")
    _task(tmp_path, 11, 11, "0-1", "12 ")
    _task(tmp_path, 12, 12, "0-1")
    _task(tmp_path, 12, 13, "0")
    _task(tmp_path, 12, 14, "0")
    _task(tmp_path, 20, 20, "1")
    assert process_tree(10, tmp_path) == [10, 11, 12]
    assert bound_cores(10, tmp_path) == {0}
    assert bound_cores(11, tmp_path) == {0}
    assert bound_cores(20, tmp_path) == {1}
    assert bound_cores(99, tmp_path) == set()  # gone: nothing bound
    assert cpus_allowed("Cpus_allowed_list:\t0-2,5\n") == {0, 1, 2, 5}
    assert cpus_allowed("Name:\tx\n") is None


def test_helpers_are_only_ever_narrowed_to_the_cores_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Engine 10 on four cores: 10 may run anywhere, 11 on 2-3 only (an operator's taskset), 12
    # on 0-1, 13 and 14 bound (OpenMP), 15 already on 2-3 and 16 on 2. Fenced to 1-3.
    _task(tmp_path, 10, 10, "0-3")
    for tid, cpus in ((11, "2-3"), (12, "0-1"), (13, "0"), (14, "1"), (15, "1-3"), (16, "2")):
        _task(tmp_path, 10, tid, cpus)
    calls: list[tuple[int, set[int]]] = []
    monkeypatch.setattr(os, "sched_setaffinity", lambda tid, cpus: calls.append((tid, cpus)))
    moved = fence_unbound(10, {1, 2, 3}, tmp_path)
    assert sorted(calls) == [(10, {1, 2, 3}), (12, {1})]  # narrowed, never widened; bound left
    assert moved == {10: {0, 1, 2, 3}, 12: {0, 1}}
    calls.clear()
    unfence(moved)
    assert sorted(calls) == [(10, {0, 1, 2, 3}), (12, {0, 1})]


def test_the_agent_keeps_to_what_is_left_and_never_to_nothing() -> None:
    assert keep_off({0, 1}, {0}) == {1}
    assert keep_off({0, 1, 2, 3}, {0, 1}) == {2, 3}
    assert keep_off({0, 1}, {0, 1}) == {0, 1}  # threads on every core: nowhere else to go
    assert keep_off({1}, {0}) == {1}
    assert keep_off({0, 1}, set()) == {0, 1}


def test_the_listening_process_is_found_by_its_port() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        assert listening_pid(listener.getsockname()[1]) == os.getpid()
        port = listener.getsockname()[1]
        assert local_listener(f"http://127.0.0.1:{port}/v1") == os.getpid()
        assert local_listener(f"http://gpu-node-7:{port}") is None  # another machine's
        assert local_listener("http://127.0.0.1") is None  # no port to find it by
    assert listening_pid(free_port()) is None


needs_two_cores = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="the agent needs a core the engine is not bound to"
)


def _agent_cores(pid: int) -> list[set[int] | None]:
    """Each thread's allowed cores, as /proc says."""
    return [cpus_allowed((t / "status").read_text()) for t in Path(f"/proc/{pid}/task").iterdir()]


def _pinned_engine(port: int) -> list[str]:
    # The simulator with every thread bound to the first core, as vLLM's CPU build binds its
    # OpenMP threads: what the agent reads is the threads' affinity, whatever the engine.
    first = min(os.sched_getaffinity(0))
    return ["taskset", "-c", str(first), sys.executable, "-m", "gpu_agent.sim", "serve", "demo",
            "--port", str(port), "--sim-preset", "tiny-test"]  # fmt: skip


# The agents here read the engine's cores every second (TIERGATE_CORE_CHECK_S), not every
# 10 s (core_keeper.CHECK_S): a test that must see a later check waits a second for it.
FAST_CHECK_S = 1.0
FAST_CHECKS = {"TIERGATE_CORE_CHECK_S": str(FAST_CHECK_S)}
FAST_FIRST_CHECK_S = min(FIRST_CHECK_S, FAST_CHECK_S)


def _managed_args(tmp: Path, engine: list[str], *more: str) -> list[str]:
    # standalone_args with the engine run by the agent instead of at an address.
    args = standalone_args(tmp, "", tier_config())
    return ["--engine-cmd", " ".join(engine), *args[2:], "--engine-start-timeout", "20", *more]


@needs_two_cores
def test_a_managed_agent_moves_off_its_engines_core_and_can_be_told_not_to(
    tmp_path: Path,
) -> None:
    first = min(os.sched_getaffinity(0))
    rest = sorted(os.sched_getaffinity(0) - {first})
    args = _managed_args(tmp_path, _pinned_engine(free_port()))
    with start_agent_process(
        args, tmp_path / "a.log", node_token=NODE_TOKEN, env=FAST_CHECKS
    ) as agent:
        cores = wait_for(
            lambda: (c := agent.status()["cores"])["agent_cpus"] == rest and c,
            what="the agent off the engine's core",
        )
        assert cores["engine_bound"] == [first] and cores["keep_off_engine_cores"] is True
        # Every thread of the agent, not only the one that asked.
        threads = _agent_cores(agent.process.pid)
        assert len(threads) > 1 and all(t == set(rest) for t in threads)
        assert f"engine threads bound to cores {first}: the agent keeps to" in agent.output()
    args = _managed_args(tmp_path, _pinned_engine(free_port()), "--no-keep-off-engine-cores")
    with start_agent_process(
        args, tmp_path / "b.log", node_token=NODE_TOKEN, env=FAST_CHECKS
    ) as agent:
        wait_for(lambda: agent.status()["health"]["engine"] == "ok", what="the engine up")
        time.sleep(FAST_FIRST_CHECK_S + 0.5)  # past the first check it would have made
        cores = agent.status()["cores"]
        assert cores["keep_off_engine_cores"] is False
        assert cores["agent_cpus"] == sorted(os.sched_getaffinity(0))
        assert all(t == os.sched_getaffinity(0) for t in _agent_cores(agent.process.pid))
        assert "the agent keeps to" not in agent.output()


@needs_two_cores
def test_an_attached_agent_finds_a_local_engine_by_its_port(tmp_path: Path) -> None:
    port = free_port()
    engine = subprocess.Popen(
        _pinned_engine(port), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    try:
        wait_answering(f"http://127.0.0.1:{port}/health")
        args = standalone_args(tmp_path, f"http://127.0.0.1:{port}", tier_config())
        with start_agent_process(
            args, tmp_path / "a.log", node_token=NODE_TOKEN, env=FAST_CHECKS
        ) as agent:
            first = min(os.sched_getaffinity(0))
            cores = wait_for(
                lambda: (c := agent.status()["cores"])["engine_bound"] == [first] and c,
                what="the engine's core found by its port",
            )
            assert cores["agent_cpus"] == sorted(os.sched_getaffinity(0) - {first})
            assert cores["binding"] is None  # attached: the agent did not start it
    finally:
        engine.terminate()
        engine.wait(10)


@needs_two_cores
def test_the_agent_moves_the_engines_helpers_beside_itself_and_gives_them_back(
    tmp_path: Path,
) -> None:
    """A real engine shaped as vLLM's CPU build: the simulator (its API server and loop, on
    every core) with a child bound to the first core (its OpenMP worker). The attached agent
    keeps off that core and moves the simulator's threads beside itself; its later checks do
    not mistake them for bound ones; it gives them back when it stops; and with
    --no-fence-engine-helpers it leaves them."""
    own = os.sched_getaffinity(0)
    first, port = min(own), free_port()
    rest = own - {first}
    sim = f"{sys.executable} -m gpu_agent.sim serve demo --port {port} --sim-preset tiny-test"
    engine = subprocess.Popen(
        ["sh", "-c", f"taskset -c {first} sleep 600 & exec {sim}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_answering(f"http://127.0.0.1:{port}/health")
        (worker,) = process_tree(engine.pid)[1:]  # the bound child
        args = standalone_args(tmp_path, f"http://127.0.0.1:{port}", tier_config())
        with start_agent_process(
            args, tmp_path / "a.log", node_token=NODE_TOKEN, env=FAST_CHECKS
        ) as agent:
            cores = wait_for(
                lambda: (c := agent.status()["cores"])["engine_helpers_on"] and c,
                what="the engine's helpers moved",
            )
            assert cores["engine_helpers_on"] == sorted(rest) == cores["agent_cpus"]
            assert cores["engine_bound"] == [first] and cores["fence_engine_helpers"] is True
            assert all(t == rest for t in _agent_cores(engine.pid))  # every simulator thread
            assert _agent_cores(worker) == [{first}]  # and the bound one where it was
            assert "engine threads not bound to a core" in agent.output()
            time.sleep(FAST_CHECK_S + 1)  # a later check: the moved threads are not the engine's
            cores = agent.status()["cores"]
            assert cores["engine_bound"] == [first] and cores["agent_cpus"] == sorted(rest)
        assert all(t == own for t in _agent_cores(engine.pid))  # given back at the stop
        args = [*args, "--no-fence-engine-helpers"]
        with start_agent_process(
            args, tmp_path / "b.log", node_token=NODE_TOKEN, env=FAST_CHECKS
        ) as agent:
            cores = wait_for(
                lambda: (c := agent.status()["cores"])["agent_cpus"] == sorted(rest) and c,
                what="the agent off the engine's core",
            )
            assert cores["fence_engine_helpers"] is False and cores["engine_helpers_on"] is None
            assert all(t == own for t in _agent_cores(engine.pid))
    finally:
        for pid in process_tree(engine.pid)[::-1]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        engine.wait(10)


_BOUND_AND_HELPERS = """
import os, subprocess, sys, threading, time
helper = threading.Thread(target=time.sleep, args=(60,), daemon=True)
helper.start()  # before the main thread binds itself: it keeps every core
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
os.sched_setaffinity(0, {int(sys.argv[1])})  # this thread only, as an OpenMP thread is bound
print(child.pid, flush=True)
time.sleep(60)
"""


@needs_two_cores
def test_the_engines_helpers_are_moved_off_its_bound_cores_and_its_bound_threads_stay() -> None:
    """A real process tree: a main thread bound to one core (as vLLM's OpenMP threads are), a
    helper thread and a child process that float; the helpers move, the bound thread stays."""
    first, rest = (
        min(os.sched_getaffinity(0)),
        os.sched_getaffinity(0) - {min(os.sched_getaffinity(0))},
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", _BOUND_AND_HELPERS, str(first)], stdout=subprocess.PIPE, text=True
    )
    child = None
    try:
        assert proc.stdout is not None
        child = int(proc.stdout.readline())
        assert bound_cores(proc.pid) == {first}
        moved = fence_unbound(proc.pid, rest)
        assert len(moved) == 2 and child in moved  # the helper thread and the child's thread
        assert all(cpus == os.sched_getaffinity(0) for cpus in moved.values())  # as they were
        assert sorted(map(len, filter(None, _agent_cores(proc.pid)))) == [1, len(rest)]
        assert {frozenset(c or ()) for c in _agent_cores(proc.pid)} == {
            frozenset({first}),
            frozenset(rest),
        }
        assert _agent_cores(child) == [rest]
        assert fence_unbound(proc.pid, rest) == {}  # nothing left to move
        unfence(moved)  # and back
        assert _agent_cores(child) == [os.sched_getaffinity(0)]
        assert sorted(map(len, filter(None, _agent_cores(proc.pid)))) == [1, len(rest) + 1]
    finally:
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, 9)
        proc.kill()
        proc.communicate()
