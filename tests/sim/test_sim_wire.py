"""The simulator's wire-level ground truth, and the load generator checked against it."""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import threading
import time
import urllib.request

from gpu_agent.sim.testing import run_sim_process
from gpu_agent.sim.wire import StampedListener
from loadgen import WorkloadSpec, run_workload


async def stall_while_bytes_arrive() -> tuple[list[float], float | None, float]:
    """A client sends 5 bytes while the server's loop is stalled (and 0.2 s longer): the
    client's clock before and after its send, the listener's stamp, and when the handler ran."""
    listener = StampedListener("127.0.0.1", 0)
    got: asyncio.Queue[tuple[float | None, float]] = asyncio.Queue()

    accepted = asyncio.Event()
    go, done, looked = threading.Event(), threading.Event(), threading.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set()
        await reader.readexactly(5)
        got.put_nowait((listener.received(writer.get_extra_info("peername")), time.time()))
        looked.set()
        writer.close()

    server = await asyncio.start_server(handle, sock=listener)
    sent: list[float] = []

    def client() -> None:
        with socket.create_connection(listener.getsockname()) as sock:
            go.wait(30)  # the loop has accepted the connection and is about to stall
            sent.append(time.time())
            sock.sendall(b"hello")  # loopback: in the server's socket before this returns
            sent.append(time.time())
            done.set()
            looked.wait(30)  # close only then: reading the close would stamp it anew

    thread = threading.Thread(target=client)
    thread.start()
    await asyncio.wait_for(accepted.wait(), 30)
    go.set()
    done.wait(30)  # the loop stalls while the bytes arrive...
    time.sleep(0.2)  # ...and for a while after
    received, handled = await asyncio.wait_for(got.get(), 30)
    thread.join()
    server.close()
    await server.wait_closed()
    return sent, received, handled


async def test_the_listener_stamps_arrival_even_while_the_loop_is_busy() -> None:
    # Measured up to three times. Once in a full run on this project's Firecracker VM
    # (kernel 6.18) the stamp read 0.2 s before the client's clock did (causally impossible: a
    # clock that jumped), and once, in another full run, 0.2 s after the send returned, when
    # the handler ran (the loopback delivery itself deferred while both cores were busy, or a
    # jump the other way). One attempt in bounds is what the listener can do; a listener that
    # stamped at handling time instead would miss all three, by the stall's 0.2 s each time.
    for _ in range(3):
        sent, received, handled = await stall_while_bytes_arrive()
        assert received is not None
        if sent[0] <= received <= sent[1]:
            break
    assert sent[0] <= received <= sent[1]  # the kernel's time, not the handler's
    assert handled - sent[1] >= 0.2


def sim_truth(base: str, since: float) -> dict[str, dict]:
    with urllib.request.urlopen(f"{base}/sim/v1/requests?since={since}") as resp:
        return {r["id"]: r for r in json.load(resp)["data"]}


async def test_load_generator_ttft_agrees_with_the_wire_ground_truth() -> None:
    with run_sim_process(extra_args=["--max-num-seqs", "8", "--sim-wire-timestamps"]) as base:
        since = time.time()
        spec = WorkloadSpec(
            base_url=f"{base}/v1", model="demo", concurrency=2, requests=40, max_tokens=8
        )
        result = await run_workload(spec)
        truth = sim_truth(base, since)
    assert result.validity["receive_times"] == "kernel"
    assert all(s.ok for s in result.samples), result.samples[0].error
    errors = []
    for s in result.samples:
        record = truth[s.response_id]
        wire_ttft = record["first_token_sent_time"] - record["received_time"]
        errors.append(abs(s.ttft - wire_ttft))
        # The wire's span holds the engine's: received before the engine saw it, written after.
        assert record["received_time"] <= record["arrival_time"]
        assert record["first_token_sent_time"] >= record["first_token_time"]
    # Both ends are stamped next to the syscalls: what is left is loopback and scheduling. (A
    # client descheduled for longer than a token gap reads two chunks at once and takes the
    # later time, and on a busy machine loopback delivery itself can be deferred by a scheduler
    # slice, ~3 ms, so a few requests may be off; most must agree.) One such event delays every
    # stream whose first token went out in that engine step: with 8 streams one event took 7 of
    # 32 off on CI's machine, so two streams keep one event from counting as many.
    assert statistics.median(errors) < 0.001, sorted(errors)
    assert sum(e < 0.002 for e in errors) >= 0.8 * len(errors), sorted(errors)


def test_without_the_flag_the_handler_start_stands_in() -> None:
    with run_sim_process() as base:
        since = time.time()
        body = {"model": "demo", "prompt": "hi", "max_tokens": 3, "stream": True}
        req = urllib.request.Request(
            f"{base}/v1/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req) as resp:
            resp.read()
        (record,) = sim_truth(base, since).values()
    assert since <= record["received_time"] <= record["arrival_time"]
    assert record["first_token_sent_time"] >= record["first_token_time"]
