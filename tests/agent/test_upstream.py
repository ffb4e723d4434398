"""The hot path's client to the engine (gpu_agent/upstream.py): framing, the pool, failures.

A scripted engine runs in the test's own loop (asyncio streams): each test says what it
answers to each request on each connection, and sees the connections open and close.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gpu_agent.sim.testing import free_port
from gpu_agent.upstream import READ_HIGH, Connection, EngineUnreachable, UpstreamError, UpstreamPool

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-request-id: r1\r\n"
EVENTS = [b'data: {"n":%d}\n\n' % i for i in range(5)] + [b"data: [DONE]\n\n"]


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


STREAM = HEAD + b"transfer-encoding: chunked\r\n\r\n" + chunked(*EVENTS)
WHOLE = b'{"id":"x","choices":[]}'
PLAIN = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
    len(WHOLE),
    WHOLE,
)

Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter, bytes], Awaitable[None]]


class Engine:
    """Reads each request (head and content-length body) and hands it to `answer`."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[bytes] = []
        self.connections = 0
        self.closed = 0  # connections whose client end closed
        self.port = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                await self.answer(reader, writer, request)
                if writer.is_closing():
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed += 1
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def engine(answer: Answer, tls: ssl.SSLContext | None = None) -> AsyncIterator[Engine]:
    eng = Engine(answer)
    server = await asyncio.start_server(eng._serve, "127.0.0.1", 0, ssl=tls)
    eng.port = server.sockets[0].getsockname()[1]
    try:
        yield eng
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2)


def replies(*data: bytes) -> Answer:
    async def answer(_r: asyncio.StreamReader, w: asyncio.StreamWriter, _q: bytes) -> None:
        for piece in data:
            w.write(piece)
            await w.drain()

    return answer


def make_pool(**kw: Any) -> UpstreamPool:
    options = {"limit": 8, "connect_timeout_s": 2.0, "read_timeout_s": 5.0, **kw}
    return UpstreamPool(**options)


async def exchange(
    pool: UpstreamPool, eng: Engine, host: str = "http://127.0.0.1"
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    url = f"{host}:{eng.port}"
    headers = [("content-type", "application/json"), ("x-request-id", "r1")]
    async with pool.post(url, "/v1/chat/completions", b'{"a":1}', headers) as resp:
        return resp.status, resp.headers, await resp.read()


async def test_a_content_length_answer_is_read_whole_with_its_headers() -> None:
    async with engine(replies(PLAIN)) as eng:
        pool = make_pool()
        status, headers, body = await exchange(pool, eng)
        pool.close()
    assert (status, body) == (200, WHOLE)
    assert (b"content-type", b"application/json") in headers
    # The request as the engine got it: line, host, length, the caller's headers, the body.
    request = eng.requests[0]
    assert request.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"\r\nhost: 127.0.0.1:%d\r\n" % eng.port in request
    assert b"\r\ncontent-length: 7\r\n" in request and b"\r\nx-request-id: r1\r\n" in request
    assert request.endswith(b'\r\n\r\n{"a":1}')


async def test_a_chunked_stream_comes_decoded_in_order_as_it_arrives() -> None:
    gate = asyncio.Event()

    async def answer(_r: asyncio.StreamReader, w: asyncio.StreamWriter, _q: bytes) -> None:
        w.write(HEAD + b"transfer-encoding: chunked\r\n\r\n" + chunked(EVENTS[0])[:-5])
        await gate.wait()  # the first event must reach the caller before the rest is sent
        w.write(chunked(*EVENTS[1:]))

    async with engine(answer) as eng:
        pool = make_pool()
        async with pool.post(f"http://127.0.0.1:{eng.port}", "/v1/completions", b"{}") as resp:
            assert resp.status == 200 and (b"x-request-id", b"r1") in resp.headers
            pieces = []
            async for piece in resp:
                pieces.append(piece)
                gate.set()
        pool.close()
    assert pieces[0] == EVENTS[0]
    assert b"".join(pieces) == b"".join(EVENTS)


class FakeTransport:
    def __init__(self) -> None:
        self.written = b""
        self.paused = False
        self.closing = False

    def write(self, data: bytes) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def get_extra_info(self, name: str) -> None:
        return None


def fake_connection(pool: UpstreamPool) -> tuple[Connection, FakeTransport]:
    conn = Connection(pool, ("127.0.0.1", 1, False))
    transport = FakeTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


@pytest.mark.parametrize("response", [STREAM, PLAIN], ids=["chunked", "content-length"])
async def test_a_response_split_at_every_byte_boundary_reads_the_same(response: bytes) -> None:
    pool = make_pool()
    expected = b"".join(EVENTS) if response is STREAM else WHOLE
    conn, _transport = fake_connection(pool)
    for cut in range(1, len(response)):
        conn.send(b"request")
        conn.data_received(response[:cut])
        conn.data_received(response[cut:])
        await conn.head()
        assert conn.status == 200
        assert await conn.read() == expected, cut
        assert conn.reusable  # complete and kept alive: the next cut reuses it


async def test_reads_pause_while_the_caller_is_far_behind() -> None:
    pool = make_pool()
    conn, transport = fake_connection(pool)
    conn.send(b"request")
    big = b"x" * (READ_HIGH // 2)
    conn.data_received(HEAD + b"transfer-encoding: chunked\r\n\r\n")
    await conn.head()
    for _ in range(3):
        conn.data_received(b"%x\r\n%s\r\n" % (len(big), big))
    assert transport.paused
    assert await conn.__anext__() == big * 3
    assert not transport.paused


async def test_an_informational_response_is_skipped() -> None:
    async with engine(replies(b"HTTP/1.1 100 Continue\r\n\r\n" + PLAIN)) as eng:
        pool = make_pool()
        assert await exchange(pool, eng) == (200, [(b"content-type", b"application/json"),
                                                   (b"content-length", b"23")], WHOLE)  # fmt: skip
        pool.close()


async def test_a_body_that_ends_with_the_close_is_complete() -> None:
    async def answer(_r: asyncio.StreamReader, w: asyncio.StreamWriter, _q: bytes) -> None:
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nall of it")
        w.close()

    async with engine(answer) as eng:
        pool = make_pool()
        assert (await exchange(pool, eng))[2] == b"all of it"
        pool.close()


async def test_an_engine_that_closes_mid_stream_is_an_upstream_error() -> None:
    async def answer(_r: asyncio.StreamReader, w: asyncio.StreamWriter, _q: bytes) -> None:
        w.write(STREAM[: STREAM.index(EVENTS[2])])
        await w.drain()
        w.close()

    async with engine(answer) as eng:
        pool = make_pool()
        pieces = []
        with pytest.raises(UpstreamError, match="closed the connection mid-response"):
            async with pool.post(f"http://127.0.0.1:{eng.port}", "/v1/completions", b"") as resp:
                async for piece in resp:
                    pieces.append(piece)
        pool.close()
    assert b"".join(pieces) == EVENTS[0] + EVENTS[1]


async def test_a_refused_connection_is_engine_unreachable() -> None:
    pool = make_pool()
    with pytest.raises(EngineUnreachable, match="cannot connect"):
        async with pool.post(f"http://127.0.0.1:{free_port()}", "/v1/completions", b""):
            pass
    assert pool._open == 0


async def test_connections_are_kept_alive_and_reused() -> None:
    async with engine(replies(STREAM)) as eng:
        pool = make_pool()
        for _ in range(5):
            assert (await exchange(pool, eng))[2] == b"".join(EVENTS)
        pool.close()
    assert (pool.connects, eng.connections, len(eng.requests)) == (1, 1, 5)


async def test_a_cancelled_exchange_closes_its_connection() -> None:
    async def answer(_r: asyncio.StreamReader, w: asyncio.StreamWriter, _q: bytes) -> None:
        w.write(HEAD + b"transfer-encoding: chunked\r\n\r\n" + chunked(EVENTS[0])[:-5])
        await w.drain()

    async with engine(answer) as eng:
        pool = make_pool()
        first = asyncio.get_running_loop().create_future()

        async def consume() -> None:
            async with pool.post(f"http://127.0.0.1:{eng.port}", "/v1/completions", b"") as r:
                async for _piece in r:
                    first.set_result(None)

        task = asyncio.create_task(consume())
        await first
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(200):  # the engine sees the connection go: it would abort the request
            if eng.closed:
                break
            await asyncio.sleep(0.01)
        assert eng.closed == 1
        assert pool._open == 0
        # The pool is still good for the next request, on a new connection.
        pool.close()


async def test_a_kept_alive_connection_closed_unanswered_is_retried_on_a_new_one() -> None:
    async def answer(_r: asyncio.StreamReader, w: asyncio.StreamWriter, request: bytes) -> None:
        if len(eng.requests) == 2:  # the engine's idle timeout races the second request
            w.close()
            return
        w.write(PLAIN)

    async with engine(answer) as eng:
        pool = make_pool()
        for _ in range(3):
            assert (await exchange(pool, eng))[2] == WHOLE
        pool.close()
    assert pool.connects == 2 and len(eng.requests) == 4


async def test_a_connection_the_engine_closed_while_idle_is_not_used() -> None:
    async def answer(_r: asyncio.StreamReader, w: asyncio.StreamWriter, _q: bytes) -> None:
        w.write(PLAIN)
        await w.drain()
        w.close()  # the engine keeps no connection alive (a restart, its idle timeout)

    async with engine(answer) as eng:
        pool = make_pool()
        for _ in range(3):
            assert (await exchange(pool, eng))[2] == WHOLE
            await asyncio.sleep(0.05)  # the close has reached the pool
        pool.close()
    assert pool.connects == 3 and len(eng.requests) == 3


async def test_an_engine_that_sends_nothing_times_out() -> None:
    async def answer(_r: asyncio.StreamReader, _w: asyncio.StreamWriter, _q: bytes) -> None:
        await asyncio.sleep(5)

    async with engine(answer) as eng:
        pool = make_pool(read_timeout_s=0.2)
        with pytest.raises(UpstreamError, match=r"sent nothing for 0\.2 s"):
            await exchange(pool, eng)
        pool.close()


async def test_the_pool_limit_holds_a_request_until_a_connection_is_free() -> None:
    async with engine(replies(STREAM)) as eng:
        pool = make_pool(limit=1)
        results = await asyncio.gather(*(exchange(pool, eng) for _ in range(4)))
        pool.close()
    assert all(r[2] == b"".join(EVENTS) for r in results)
    assert pool.connects == 1 and eng.connections == 1


async def test_a_header_with_a_line_break_is_refused() -> None:
    pool = make_pool()
    with pytest.raises(UpstreamError, match="line break"):
        pool.post("http://127.0.0.1:1", "/v1/completions", b"", [("x-request-id", "a\r\nb: c")])


async def test_a_request_cancelled_while_waiting_for_the_pool_takes_no_turn() -> None:
    release = asyncio.Event()

    async def answer(_r: asyncio.StreamReader, w: asyncio.StreamWriter, _q: bytes) -> None:
        await release.wait()
        w.write(PLAIN)

    async with engine(answer) as eng:
        pool = make_pool(limit=1)
        first = asyncio.create_task(exchange(pool, eng))
        waiting = [asyncio.create_task(exchange(pool, eng)) for _ in range(2)]
        await asyncio.sleep(0.05)
        waiting[0].cancel()
        release.set()
        assert (await first)[2] == WHOLE
        assert (await asyncio.wait_for(waiting[1], 5))[2] == WHOLE
        pool.close()
    assert waiting[0].cancelled() and pool.connects == 1


async def test_an_engine_that_closes_without_answering_is_an_upstream_error() -> None:
    async def answer(_r: asyncio.StreamReader, w: asyncio.StreamWriter, _q: bytes) -> None:
        w.close()

    async with engine(answer) as eng:
        pool = make_pool()
        with pytest.raises(UpstreamError, match="without answering"):
            await exchange(pool, eng)
        pool.close()


async def test_a_base_url_path_prefixes_the_request_path() -> None:
    async with engine(replies(PLAIN)) as eng:
        pool = make_pool()
        async with pool.post(f"http://127.0.0.1:{eng.port}/engine", "/v1/completions", b"") as r:
            assert await r.read() == WHOLE
        pool.close()
    assert eng.requests[0].startswith(b"POST /engine/v1/completions HTTP/1.1\r\n")


def self_signed(tmp_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context, client context trusting only the server's certificate)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    pem = cert.public_bytes(serialization.Encoding.PEM)
    (tmp_path / "cert.pem").write_bytes(pem)
    (tmp_path / "key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))  # fmt: skip
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    return server, ssl.create_default_context(cadata=pem.decode())


async def test_an_https_engine_is_reached_over_tls_with_its_certificate_checked(
    tmp_path: Path,
) -> None:
    server_tls, client_tls = self_signed(tmp_path)
    async with engine(replies(STREAM), tls=server_tls) as eng:
        pool = make_pool()
        with pytest.raises(EngineUnreachable, match="CERTIFICATE_VERIFY_FAILED"):  # not trusted
            await exchange(pool, eng, "https://localhost")
        pool.ssl_context = client_tls
        for _ in range(2):
            assert (await exchange(pool, eng, "https://localhost"))[2] == b"".join(EVENTS)
        pool.close()
    assert pool.connects == 1 and eng.requests[-1].find(b"\r\nhost: localhost:") > 0
