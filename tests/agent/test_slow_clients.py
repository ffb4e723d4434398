"""Clients slower than the engine (docs/architecture.md#the-request-path): the engine slot goes back
when the engine has finished, however slowly the client reads; a client that stops reading is cut
off after the write timeout; the bytes held for slow clients are bounded.

The clients are bare sockets with a small receive buffer that read only when told. Each SSE
chunk carries the model's name, so a long served name makes the answer several MiB: more than
the kernel's socket buffers on loopback (4 MiB at most), so the gateway itself must hold it.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpu_agent.sim.testing import run_sim_process
from gpu_agent.testing import AgentProcess
from tests.agent.agent_helpers import ALL_KEY, standalone_args, start_agent, tier_config
from tests.waiting import wait_for

LONG_MODEL = "slow-reader-" + "m" * 1500  # ~1.7 KB per chunk
ANSWER_TOKENS = 3000  # ~5 MiB of SSE
WRITE_TIMEOUT_S = 2.0


@pytest.fixture(scope="module")
def long_sim() -> Iterator[str]:
    # Time scale 0.2: the 3000 tokens take about a second.
    args = ("--sim-preset", "tiny-test", "--sim-time-scale", "0.2", "--max-num-seqs", "16")
    with run_sim_process(LONG_MODEL, args) as url:
        yield url


def agent_for(sim: str, tmp: Path, *extra: str) -> AgentProcess:
    args = standalone_args(tmp, sim, tier_config())
    return start_agent([*args, "--client-write-timeout", str(WRITE_TIMEOUT_S), *extra], tmp / "log")


@pytest.fixture(scope="module")
def agent(long_sim: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    with agent_for(long_sim, tmp_path_factory.mktemp("slow")) as proc:
        yield proc


class RawStream:
    """One streamed chat request on a bare socket, read only when the test says so."""

    def __init__(self, port: int, request_id: str, receive_buffer: int = 4096) -> None:
        body = json.dumps(
            {
                "model": LONG_MODEL,
                "messages": [{"role": "user", "content": "go"}],
                "max_tokens": ANSWER_TOKENS,
                "ignore_eos": True,
                "stream": True,
            }
        ).encode()
        self.sock = socket.socket()
        # Before connect, so the advertised window stays small.
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.connect(("127.0.0.1", port))
        head = (
            "POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\n"
            f"authorization: Bearer {ALL_KEY}\r\ncontent-type: application/json\r\n"
            f"x-request-id: {request_id}\r\ncontent-length: {len(body)}\r\n\r\n"
        )
        self.sock.sendall(head.encode() + body)
        self.received = bytearray()

    def read(self, size: int, timeout: float = 10.0) -> bytes:
        self.sock.settimeout(timeout)
        data = self.sock.recv(size)
        self.received += data
        return data

    def read_to_end(self, pace_s: float = 0.0, size: int = 65536) -> str | None:
        """Read until the server closes the connection or ends the chunked body; the error
        that ended it, if any."""
        try:
            while not self.received.endswith(b"\r\n0\r\n\r\n"):
                if not self.read(size, timeout=20.0):
                    return "eof"
                if pace_s:
                    time.sleep(pace_s)
        except OSError as exc:
            return type(exc).__name__
        return None

    def close(self) -> None:
        self.sock.close()


def engine_record(sim: str, request_id: str) -> dict[str, Any] | None:
    records = httpx.get(sim + "/sim/v1/requests").json()["data"]
    return next((r for r in records if r["request_id"] == request_id), None)


def engine_finished(sim: str, request_id: str) -> dict[str, Any] | None:
    record = engine_record(sim, request_id)
    return record if record is not None and record["finish_time"] is not None else None


def outcomes(agent: AgentProcess) -> dict[str, float]:
    families = text_string_to_metric_families(httpx.get(agent.url + "/metrics").text)
    family = next(f for f in families if f.name == "tiergate_requests")
    return {
        s.labels["status"]: s.value
        for s in family.samples
        if s.name == "tiergate_requests_total" and s.labels["tier"] == "online"
    }


def test_a_client_that_stops_reading_frees_its_slot_and_is_cut_off_after_the_write_timeout(
    agent: AgentProcess, long_sim: str
) -> None:
    before = outcomes(agent).get("client_timeout", 0)
    request_id = f"stalled-{time.time_ns()}"
    client = RawStream(agent.port, request_id)
    try:
        assert client.read(100).startswith(b"HTTP/1.1 200")
        record = wait_for(lambda: engine_finished(long_sim, request_id), 20, "the engine to end")
        # The engine wrote the whole answer; the client has read almost none of it.
        assert record["finish_reason"] == "length"
        assert record["output_tokens"] == ANSWER_TOKENS
        # Its slot is back well before the write timeout could have ended the client.
        freed = wait_for(
            lambda: agent.status()["in_flight"] == 0, WRITE_TIMEOUT_S / 2, "the slot to be freed"
        )
        assert freed and len(client.received) < 4096
        # Then the gateway gives up on it: the connection is aborted, the answer unfinished.
        wait_for(
            lambda: outcomes(agent).get("client_timeout", 0) == before + 1,
            WRITE_TIMEOUT_S + 5,
            "the write timeout to end the client",
        )
        assert client.read_to_end() is not None
        assert b"data: [DONE]" not in client.received
        assert len(client.received) < ANSWER_TOKENS * len(LONG_MODEL)
    finally:
        client.close()


def test_a_slow_steady_reader_gets_the_whole_answer_after_its_slot_is_freed(
    agent: AgentProcess, long_sim: str
) -> None:
    before = outcomes(agent).get("ok", 0)
    request_id = f"steady-{time.time_ns()}"
    client = RawStream(agent.port, request_id, receive_buffer=65536)
    ended: list[str | None] = []
    # About 2 MB/s: slower than the engine writes, never still for the write timeout.
    reader = threading.Thread(target=lambda: ended.append(client.read_to_end(pace_s=0.05)))
    try:
        reader.start()
        wait_for(lambda: engine_finished(long_sim, request_id), 20, "the engine to end")
        wait_for(lambda: agent.status()["in_flight"] == 0, 2, "the slot to be freed")
        read_when_freed = len(client.received)
        reader.join(30)
    finally:
        client.close()
    assert ended == [None]
    body = bytes(client.received)
    assert body.count(b"data: {") == ANSWER_TOKENS + 1  # the role chunk, then one per token
    assert b"data: [DONE]" in body[-200:]
    assert read_when_freed < len(body) / 2
    wait_for(lambda: outcomes(agent).get("ok", 0) == before + 1, 5, "an ok outcome")


def test_past_its_buffer_bound_the_gateway_stops_reading_the_engine(
    long_sim: str, tmp_path: Path
) -> None:
    """With 256 KiB per stream, a client that does not read keeps its slot (the engine is
    back-pressured, the gateway holds no more) until the write timeout ends it."""
    # A longer write timeout here: the engine (about a second) must end before it does, even
    # on a loaded machine.
    extra = ("--client-buffer-bytes", "262144", "--client-write-timeout", "5")
    with agent_for(long_sim, tmp_path, *extra) as bounded:
        request_id = f"bounded-{time.time_ns()}"
        client = RawStream(bounded.port, request_id)
        try:
            client.read(100)
            wait_for(lambda: engine_finished(long_sim, request_id), 20, "the engine to end")
            assert bounded.status()["in_flight"] == 1
            wait_for(
                lambda: bounded.status()["in_flight"] == 0,
                15,
                "the write timeout to end the client",
            )
            assert outcomes(bounded).get("client_timeout") == 1
        finally:
            client.close()
