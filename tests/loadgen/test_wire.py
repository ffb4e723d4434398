"""The load generator's HTTP layer: kernel receive times, keep-alive, TLS, broken servers."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import gc
import ipaddress
import json
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from loadgen.client import send_request
from loadgen.pool import Pool
from loadgen.prompts import PlannedRequest
from loadgen.receive import KernelClock, TlsRecords, event_reads
from tests.loadgen.test_streams import chunk

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
TAIL = chunk(usage={"prompt_tokens": 3, "completion_tokens": 2}) + b"data: [DONE]\n\n"


def planned(tier: str | None = None) -> PlannedRequest:
    body = json.dumps({"model": "m", "prompt": "x", "stream": True}).encode()
    return PlannedRequest(index=0, tier=tier, body=body, max_tokens=2)


def read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(65536)
        if not piece:
            return data
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        piece = conn.recv(1 << 20)
        if not piece:
            break
        body += piece
    return head + b"\r\n\r\n" + body


@pytest.fixture
def thread_server() -> Iterator[Callable[[Callable[[socket.socket], None]], str]]:
    """A blocking server in its own thread: it keeps its own time while the test's event loop
    is stalled. `start(handle)` runs `handle(conn)` for each connection; returns a base URL."""
    listeners: list[socket.socket] = []

    def start(handle: Callable[[socket.socket], None]) -> str:
        listener = socket.create_server(("127.0.0.1", 0))
        listeners.append(listener)

        def serve() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                with conn:
                    handle(conn)

        threading.Thread(target=serve, daemon=True).start()
        return f"http://127.0.0.1:{listener.getsockname()[1]}/v1"

    yield start
    for listener in listeners:
        listener.close()


async def test_a_stalled_loop_does_not_delay_the_first_token(thread_server) -> None:
    """The server sends the first token 50 ms in, while the client's loop is blocked from 10 to
    310 ms: the TTFT recorded is the token's arrival (~50 ms), not when the loop read it."""

    def handle(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(HEAD + chunk(""))  # vLLM's role chunk: no content
        time.sleep(0.05)
        conn.sendall(chunk("first"))
        time.sleep(0.45)  # after the stall
        conn.sendall(chunk("second") + TAIL)

    url = thread_server(handle) + "/completions"
    loop = asyncio.get_running_loop()
    pool = Pool()
    loop.call_later(0.01, time.sleep, 0.3)
    before = time.perf_counter()
    sample = await send_request(
        pool, url, {}, planned(), tier_header="X-Tier", stream=True, chat=True
    )
    pool.close()
    assert sample.error is None, sample.error
    assert pool.kernel_stamps
    assert sample.ttft is not None and 0.045 < sample.ttft < 0.15, sample.ttft
    assert time.perf_counter() - before > 0.45
    assert sample.itl is not None and sample.itl.count == 1
    assert (
        sample.itl.max is not None and 0.4 < sample.itl.max < 0.5
    )  # the second token's own arrival, 450 ms later
    assert sample.output_tokens == 2


async def test_a_kept_alive_connection_the_server_dropped_is_retried(thread_server) -> None:
    seen: list[int] = []

    def handle(conn: socket.socket) -> None:
        # Answers the first request of each connection and drops the connection on the next.
        for n in range(2):
            if not read_request(conn):
                return
            seen.append(n)
            if n == 1:
                return
            body = b'{"id": "cmpl-1", "usage": {"prompt_tokens": 3, "completion_tokens": 4}}'
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )

    url = thread_server(handle) + "/completions"
    pool = Pool()
    try:
        for _ in range(2):
            sample = await send_request(
                pool, url, {}, planned(), tier_header="X-Tier", stream=False, chat=False
            )
            assert sample.error is None, sample.error
            assert sample.output_tokens == 4
    finally:
        pool.close()
    # The second request went out on the kept-alive socket, was dropped, and was sent again.
    assert seen == [0, 1, 0]


async def test_a_header_with_a_line_break_is_refused_not_sent(thread_server) -> None:
    got: list[bytes] = []
    url = thread_server(lambda conn: got.append(read_request(conn))) + "/completions"
    pool = Pool()
    sample = await send_request(
        pool, url, {}, planned("online\r\nX-Evil: 1"), tier_header="X-Tier", stream=True, chat=True
    )
    pool.close()
    assert sample.error == "WireError: header 'X-Tier' contains a line break"
    assert got == []


async def test_an_invalid_http_response_is_an_error(thread_server) -> None:
    def handle(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(b"SMTP ready\r\n\r\n")

    url = thread_server(handle) + "/completions"
    pool = Pool()
    sample = await send_request(
        pool, url, {}, planned(), tier_header="X-Tier", stream=True, chat=True
    )
    pool.close()
    assert sample.error is not None and sample.error.startswith("WireError: invalid HTTP response")


async def test_a_timeout_is_recorded_and_the_socket_dropped(thread_server) -> None:
    def handle(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(HEAD)
        time.sleep(1.0)

    url = thread_server(handle) + "/completions"
    pool = Pool()
    sample = await send_request(
        pool, url, {}, planned(), tier_header="X-Tier", stream=True, chat=True, timeout_s=0.2
    )
    assert sample.error == "timeout"
    assert not pool._all  # the unfinished connection was closed, not pooled
    pool.close()


# --- TLS ---------------------------------------------------------------------------------------


def self_signed(tmp: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


async def test_https_endpoints_stream_over_tls(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(HEAD + chunk("a"))
        await writer.drain()
        await asyncio.sleep(0.02)
        writer.write(chunk("b") + TAIL)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    url = f"https://127.0.0.1:{port}/v1/completions"
    try:
        trusted = Pool(ssl.create_default_context(cafile=str(cert)))
        sample = await send_request(
            trusted, url, {}, planned(), tier_header="X-Tier", stream=True, chat=True
        )
        trusted.close()
        assert sample.error is None, sample.error
        assert sample.content_chunks == 2 and sample.output_tokens == 2
        assert sample.itl is not None and sample.itl.max is not None and sample.itl.max > 0.015

        untrusted = Pool()  # the system's CAs: a self-signed certificate is refused
        sample = await send_request(
            untrusted, url, {}, planned(), tier_header="X-Tier", stream=True, chat=True
        )
        untrusted.close()
        assert sample.error is not None and "certificate verify failed" in sample.error
    finally:
        server.close()
        await server.wait_closed()


async def test_a_request_larger_than_the_socket_buffer_goes_out_whole(thread_server) -> None:
    sizes: list[int] = []

    def handle(conn: socket.socket) -> None:
        time.sleep(0.1)  # let the client's socket buffer fill first
        sizes.append(len(read_request(conn)))
        conn.sendall(HEAD + chunk("a") + TAIL)

    url = thread_server(handle) + "/completions"
    body = json.dumps({"model": "m", "prompt": "x" * (32 << 20), "stream": True}).encode()
    pool = Pool()
    sample = await send_request(
        pool,
        url,
        {},
        PlannedRequest(index=0, tier=None, body=body, max_tokens=2),
        tier_header="X-Tier",
        stream=True,
        chat=True,
    )
    pool.close()
    assert sample.error is None, sample.error
    assert sizes and sizes[0] > len(body)  # head + the whole body arrived


# --- cancelled connects and handshakes, informational responses, header text, clock steps ----


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def stalled_listener() -> Iterator[socket.socket]:
    """A listener whose accept queue is full and never drained: a connect to it hangs (the
    kernel drops the SYN and the client keeps retrying it)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    port = listener.getsockname()[1]
    for _ in range(4):  # a backlog of 0 still holds one; fill it and the SYN queue's slack
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    yield listener
    for filler in fillers:
        filler.close()
    listener.close()


@pytest.mark.filterwarnings("error::ResourceWarning")
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
async def test_requests_cancelled_while_connecting_close_their_sockets(stalled_listener) -> None:
    url = f"http://127.0.0.1:{stalled_listener.getsockname()[1]}/v1/completions"
    pool = Pool()
    before = open_fds()
    for _ in range(20):
        sample = await send_request(
            pool, url, {}, planned(), tier_header="X-Tier", stream=True, chat=True, timeout_s=0.02
        )
        assert sample.error == "timeout"
    gc.collect()
    # At most what was open before (a socket of an earlier test may be collected meanwhile).
    assert open_fds() <= before  # no socket left behind by the 20 timeouts
    pool.close()


@pytest.mark.filterwarnings("error::ResourceWarning")
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
async def test_requests_cancelled_during_the_tls_handshake_close_their_sockets(
    thread_server,
) -> None:
    def handle(conn: socket.socket) -> None:
        # Takes the ClientHello, never answers, and holds its end until the client closes.
        while conn.recv(65536):
            pass

    url = thread_server(handle).replace("http://", "https://") + "/completions"
    pool = Pool()
    before = open_fds()
    for _ in range(5):
        sample = await send_request(
            pool, url, {}, planned(), tier_header="X-Tier", stream=True, chat=True, timeout_s=0.05
        )
        assert sample.error == "timeout"
    gc.collect()
    await asyncio.sleep(0.1)  # the server's end closes once it reads the client's close
    assert open_fds() <= before
    pool.close()


async def test_a_100_continue_is_skipped_and_the_final_response_read(thread_server) -> None:
    def handle(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        time.sleep(0.01)
        conn.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n")
        conn.sendall(HEAD + chunk("a") + chunk("b") + TAIL)

    url = thread_server(handle) + "/completions"
    pool = Pool()
    sample = await send_request(
        pool, url, {}, planned(), tier_header="X-Tier", stream=True, chat=True
    )
    pool.close()
    assert sample.error is None, sample.error
    assert sample.status == 200 and sample.content_chunks == 2 and sample.output_tokens == 2


async def test_a_header_outside_latin_1_is_a_wire_error_not_a_crash(thread_server) -> None:
    got: list[bytes] = []
    url = thread_server(lambda conn: got.append(read_request(conn))) + "/completions"
    pool = Pool()
    sample = await send_request(
        pool, url, {}, planned("онлайн"), tier_header="X-Tier", stream=True, chat=True
    )
    assert sample.error == "WireError: header 'X-Tier' has characters outside Latin-1"
    sample = await send_request(
        pool, url + "/☃", {}, planned(), tier_header="X-Tier", stream=True, chat=True
    )
    pool.close()
    assert sample.error is not None and "outside Latin-1" in sample.error
    assert got == []  # nothing was sent


class SteppingWall:
    """The wall clock, set forward or back by `step` seconds once `armed` is set."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.armed = False

    def __call__(self) -> float:
        return time.time() + (self.step if self.armed else 0.0)


@pytest.mark.parametrize("step", [5.0, -5.0, 0.3])
async def test_a_wall_clock_step_while_chunks_wait_does_not_move_their_times(
    thread_server, step: float
) -> None:
    """The first token arrives 50 ms in while the loop is blocked; the wall clock steps before
    the loop reads it, and steps back before the second token (450 ms later). The first one's
    kernel stamp is on the clock from before the step: converted with the offset after it,
    TTFT would be off by the step (negative for a forward one)."""
    wall = SteppingWall(step)

    def handle(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(HEAD + chunk(""))
        time.sleep(0.05)
        conn.sendall(chunk("first"))
        time.sleep(0.44)
        wall.armed = False  # and back (the kernel's stamps never moved: they are real time)
        time.sleep(0.01)
        conn.sendall(chunk("second") + TAIL)

    def stall() -> None:
        time.sleep(0.3)
        wall.armed = True  # the step happens after the token arrived, before it is read

    url = thread_server(handle) + "/completions"
    pool = Pool(clock=KernelClock(wall=wall))
    asyncio.get_running_loop().call_later(0.01, stall)
    sample = await send_request(
        pool, url, {}, planned(), tier_header="X-Tier", stream=True, chat=True
    )
    pool.close()
    assert sample.error is None, sample.error
    assert pool.clock.steps >= 1  # and 2 unless a stall outlasted the step's 130 ms
    assert sample.ttft is not None and 0.045 < sample.ttft < 0.1, sample.ttft
    assert sample.itl.max is not None and 0.4 < sample.itl.max < 0.5, sample.itl


class FakeClocks:
    """perf_counter and a wall clock that runs `offset` seconds ahead of it."""

    def __init__(self, offset: float) -> None:
        self.now, self.offset = 10.0, offset

    def perf(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.now + self.offset


def test_the_kernel_clock_places_stamps_across_a_step() -> None:
    clocks = FakeClocks(1000.0)
    clock = KernelClock(perf=clocks.perf, wall=clocks.wall)
    now, offset = clock.wake()
    assert (now, offset) == (10.0, 1000.0)
    clocks.now = 10.1
    now, offset = clock.wake()
    assert clock.steps == 0 and clock.place(1010.05, now, offset, 10.0) == pytest.approx(10.05)
    clocks.now, clocks.offset = 10.2, 1005.0  # the wall clock went 5 s forward
    now, offset = clock.wake()
    assert clock.steps == 1 and offset == pytest.approx(1005.0)
    # Received before the step (old clock) and after it (new clock): both land in place.
    assert clock.place(1010.15, now, offset, 10.0) == pytest.approx(10.15)
    assert clock.place(1015.19, now, offset, 10.0) == pytest.approx(10.19)
    assert clock.place(None, now, offset, 10.0) == now  # no stamp: the read's time
    assert clock.place(2000.0, now, offset, 10.0) == now  # never after the read
    assert clock.place(1.0, now, offset, 10.0) == 10.0  # never before the send


def test_reads_are_cut_where_events_end() -> None:
    one = b"c8\r\ndata: {}\n\n\r\n"
    assert event_reads(one) == [len(one)]  # one event and its chunk's CRLF: one read
    two = one + b"c9\r\ndata: {1}\n\n\r\n"
    assert event_reads(two) == [len(one) - 2, len(two) - len(one) + 2]
    partial = one + b"c9\r\ndata: {"
    assert event_reads(partial) == [len(one) - 2, len(partial) - len(one) + 2]  # may be later
    assert event_reads(b"data: x\n") == [8]  # no end yet: one read
    assert event_reads(b"\ndata: y\n\n", before=b"x\n") == [1, 9]  # an end split across reads
    crlf = b"data: a\r\n\r\ndata: b\r\n\r\n"
    assert event_reads(crlf) == [11, 11]


def test_tls_reads_are_cut_where_records_end() -> None:
    def record(size: int) -> bytes:
        return b"\x17\x03\x03" + size.to_bytes(2, "big") + b"x" * size

    records = TlsRecords()
    data = record(10) + record(20) + record(30)[:12]
    assert records.reads(data) == [15, 25, 12]
    rest = record(30)[12:] + record(4)[:3]  # the header of the next one is split
    assert records.reads(rest) == [23, 3]
    assert records.reads(record(4)[3:]) == [6]
