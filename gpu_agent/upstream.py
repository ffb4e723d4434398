"""The hot path's client to the engine (DESIGN.md 3): HTTP/1.1 (TLS for an https engine URL)
over asyncio protocols, httptools (llhttp) for the response's framing, a keep-alive pool.

aiohttp's client costs the gateway about a third of a millisecond per request before a byte
reaches the engine (its request object, a writer task, its stream reader); here the request
is one `transport.write` in the handler's own loop iteration, and the response's body pieces
(chunked transfer decoding done by llhttp) go to the handler as they arrive, in order, joined
when several came in one read. The control plane (/v1/models, /metrics, the sampler) keeps its
aiohttp session.

Errors: `UpstreamError`, and its `EngineUnreachable` when no connection could be opened (the
gateway's 503 engine_down). Leaving `post`'s context early (cancelled, the client gone, an
error) closes the socket, so the engine aborts the request; a response read to its end leaves
the connection in the pool. A kept-alive connection the engine closed before answering (its
idle timeout racing our request) is retried once on a new one. Reads are paused while the
handler is far behind, so TCP holds the engine back as it would for a direct client, and
between the reads of a paced stream (`Connection.pace`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections import deque
from collections.abc import AsyncIterator, Iterable
from typing import Any
from urllib.parse import urlsplit

import httptools

READ_HIGH = 256 * 1024  # bytes buffered for the handler before reads pause
Headers = list[tuple[bytes, bytes]]


class UpstreamError(Exception):
    """The exchange with the engine failed; the message says how."""


class EngineUnreachable(UpstreamError):
    """No connection to the engine could be opened."""


class _Stale(UpstreamError):
    def __init__(self) -> None:
        super().__init__("the engine closed a kept-alive connection")


_Key = tuple[str, int, bool]  # host, port, TLS


class Connection(asyncio.Protocol):
    """One socket to the engine, one exchange at a time; while one runs it is its response:
    `status`, `headers` (names lower-cased), then `read()` or `async for` over the body."""

    def __init__(self, pool: UpstreamPool, key: _Key) -> None:
        self.pool = pool
        self.key = key
        self.loop = pool.loop
        self.transport: Any = None  # uvloop's transport is not an asyncio.Transport
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.reused = False
        self.idle_since = 0.0
        self._hold: asyncio.TimerHandle | None = None  # reads paused until it fires (pace)
        self._begin()

    def _begin(self) -> None:
        self.status = 0
        self.headers: Headers = []
        self.keep_alive = False
        self._chunks: list[bytes] = []
        self._size = 0
        self._paused = False
        self._got_bytes = False
        self._framed = False  # content-length or chunked: the body does not end at the close
        self._complete = False
        self._error: UpstreamError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._waiting_since = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._pace = 0.0  # a held connection is never complete, so never begins again

    # -- the protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self._got_bytes = True
        if self._timer is None:  # bytes while idle: not HTTP any more; drop the socket
            self.close()
        else:
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserError as exc:
                self._fail(UpstreamError(f"invalid HTTP response from the engine: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self.closed = True
            self.pool.gone(self)
        if self._timer is None or self._complete:
            return
        if self.reused and not self._got_bytes:
            self._fail(_Stale())
        elif self.status and not self._framed:
            self._message_ends()  # a body delimited by the close
        elif not self._got_bytes:
            self._fail(UpstreamError("the engine closed the connection without answering"))
        else:
            detail = f": {exc}" if exc is not None else ""
            self._fail(UpstreamError(f"the engine closed the connection mid-response{detail}"))

    # httptools' callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name in (b"content-length", b"transfer-encoding"):
            self._framed = True
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # informational (100 Continue): the real response follows
            self.headers = []
            self._framed = False
            return
        self.status = status
        self.keep_alive = self.parser.should_keep_alive()
        self._wake()

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)
        self._size += len(body)
        if self._size > READ_HIGH and not self._paused:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self.status:
            self._message_ends()

    # -- the exchange -------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        """Start an exchange: the request goes to the kernel now."""
        self._begin()
        self._waiting_since = self.loop.time()
        self._timer = self.loop.call_at(self._waiting_since + self.pool.read_timeout_s, self._check)
        if self.transport.is_closing():
            self._fail(_Stale() if self.reused else UpstreamError("the connection is closed"))
            return
        self.transport.write(data)

    async def head(self) -> None:
        """Wait for the status line and headers."""
        while not self.status:
            await self._wait()

    async def read(self) -> bytes:
        """The whole body."""
        return b"".join([piece async for piece in self])

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        """What the engine sent since the last piece, as it came, once there is some."""
        while not self._chunks:
            if self._complete:
                raise StopAsyncIteration
            await self._wait()
        chunks = self._chunks
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self._chunks = []
        self._size = 0
        if self._pace and not self._complete and not self.closed:
            self._paused = False
            self._start_hold()
        elif self._paused:
            self._paused = False
            if not self.closed:
                self.transport.resume_reading()
        return data

    def pace(self, seconds: float) -> None:
        """From now on read the engine at most once every `seconds`: reads pause until then,
        and again after each piece, so what the engine sent meanwhile comes as one piece.
        Fewer wake-ups, reads and writes for a stream whose client wants throughput, not
        each token the moment it is made (a tier's `stream_pace_ms`, docs/admission.md)."""
        self._pace = seconds
        if not self._complete and not self.closed:
            self._start_hold()

    def _start_hold(self) -> None:
        if self._hold is None:  # what comes until the hold ends arrives in one read
            self.transport.pause_reading()
            self._hold = self.loop.call_later(self._pace, self._unhold)

    def _unhold(self) -> None:
        self._hold = None
        if not self.closed:
            self.transport.resume_reading()

    async def _wait(self) -> None:
        if self._error is not None:
            raise self._error
        self._waiter = waiter = self.loop.create_future()
        self._waiting_since = self.loop.time()
        try:
            await waiter
        finally:
            self._waiter = None
        if self._error is not None:
            raise self._error

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _message_ends(self) -> None:
        self._complete = True
        self._pace = 0.0
        self._stop_timer()
        self._wake()

    def _fail(self, error: UpstreamError) -> None:
        self._error = error
        self._stop_timer()
        self.close()
        self._wake()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        # One timer per exchange, re-armed as seldom as the read timeout: it fires only when
        # the handler has waited that long for a byte.
        timeout, now = self.pool.read_timeout_s, self.loop.time()
        waiting = self._waiter is not None and not self._waiter.done()
        if waiting and now - self._waiting_since >= timeout:
            self._fail(UpstreamError(f"the engine sent nothing for {timeout:g} s"))
            return
        self._timer = self.loop.call_at(
            (self._waiting_since if waiting else now) + timeout, self._check
        )

    @property
    def reusable(self) -> bool:
        return self._complete and self.keep_alive and not self.closed and not self._chunks

    def close(self) -> None:
        """Drop the socket: an exchange in progress is aborted at the engine."""
        self._stop_timer()
        if self._hold is not None:
            self._hold.cancel()
            self._hold = None
        if self.closed:
            return
        self.closed = True
        self.pool.gone(self)
        if self.transport is not None:
            self.transport.close()


class _Exchange:
    """`UpstreamPool.post`'s context: the response on entry; on exit the connection goes
    back to the pool when the response was read to its end, else it is closed."""

    __slots__ = ("_conn", "_data", "_key", "_pool")

    def __init__(self, pool: UpstreamPool, key: _Key, data: bytes) -> None:
        self._pool, self._key, self._data = pool, key, data
        self._conn: Connection | None = None

    async def __aenter__(self) -> Connection:
        pool = self._pool
        fresh = False
        while True:
            conn = self._conn = await pool.acquire(self._key, fresh)
            try:
                conn.send(self._data)
                await conn.head()
                return conn
            except _Stale:
                fresh = True  # once more on a new socket (never stale): the engine saw nothing
            except BaseException:
                conn.close()
                raise

    async def __aexit__(self, *exc: object) -> None:
        conn = self._conn
        if conn is None:
            return
        if conn.reusable:
            self._pool.release(conn)
        else:
            conn.close()


class UpstreamPool:
    """Keep-alive connections to the engine, at most `limit` open at a time."""

    def __init__(
        self,
        limit: int,
        connect_timeout_s: float,
        read_timeout_s: float,
        keepalive_s: float = 30.0,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.limit = limit
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.keepalive_s = keepalive_s
        self._idle: dict[_Key, list[Connection]] = {}
        self._open = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._base = ("", ("", 0, False), b"", b"")  # the last base URL: its key, host, path
        self.ssl_context: ssl.SSLContext | None = None  # https: the default one, verifying
        self.connects = 0  # connections opened, for tests and reports

    def post(
        self, base: str, path: str, body: bytes, headers: Iterable[tuple[str, str]] = ()
    ) -> _Exchange:
        """``async with pool.post(...) as response``: POST `body` to `base` + `path`."""
        url, key, host, prefix = self._base
        if base != url:
            key, host, prefix = _address(base)
            self._base = (base, key, host, prefix)
        lines = [b"POST %s%s HTTP/1.1\r\nhost: %s\r\ncontent-length: %d\r\n" % (
            prefix, path.encode("latin-1"), host, len(body))]  # fmt: skip
        for name, value in headers:
            line = f"{name}: {value}\r\n"
            if line.count("\n") != 1 or "\r" in line[:-2]:
                raise UpstreamError(f"header {name!r} contains a line break")
            lines.append(line.encode("latin-1"))
        lines.append(b"\r\n")
        lines.append(body)
        return _Exchange(self, key, b"".join(lines))

    async def acquire(self, key: _Key, fresh: bool = False) -> Connection:
        while True:
            idle = self._idle.get(key)
            while idle and not fresh:
                conn = idle.pop()
                if not conn.closed and self.loop.time() - conn.idle_since < self.keepalive_s:
                    conn.reused = True
                    return conn
                conn.close()
            if self._open < self.limit:
                return await self._connect(key)
            if not self._close_one_idle():
                waiter = self.loop.create_future()
                self._waiters.append(waiter)
                try:
                    await waiter
                except BaseException:
                    if waiter.done() and not waiter.cancelled():
                        self._wake_one()  # woken, then cancelled: the turn passes on
                    else:
                        self._waiters.remove(waiter)
                    raise

    async def _connect(self, key: _Key) -> Connection:
        self._open += 1
        conn = Connection(self, key)
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                await self.loop.create_connection(
                    lambda: conn, key[0], key[1], ssl=self._tls() if key[2] else None
                )
        except BaseException as exc:
            self._unopened(conn)
            where = f"the engine at {key[0]}:{key[1]}"
            if isinstance(exc, TimeoutError):  # aiohttp's connect timeout was a 502 too
                timeout = self.connect_timeout_s
                raise UpstreamError(f"connecting to {where} timed out ({timeout:g} s)") from None
            if isinstance(exc, OSError):
                detail = exc.strerror or exc
                raise EngineUnreachable(f"cannot connect to {where}: {detail}") from exc
            raise
        self.connects += 1
        return conn

    def _tls(self) -> ssl.SSLContext:
        if self.ssl_context is None:
            self.ssl_context = ssl.create_default_context()
        return self.ssl_context

    def _unopened(self, conn: Connection) -> None:
        if conn.transport is not None:
            conn.close()  # made, then the wait was cancelled
        elif not conn.closed:
            conn.closed = True
            self._open -= 1
            self._wake_one()

    def release(self, conn: Connection) -> None:
        conn.idle_since = now = self.loop.time()
        idle = self._idle.setdefault(conn.key, [])
        while idle and (idle[0].closed or now - idle[0].idle_since >= self.keepalive_s):
            idle.pop(0).close()
        idle.append(conn)
        self._wake_one()

    def gone(self, conn: Connection) -> None:
        """A connection closed (by either side): its slot is free."""
        self._open -= 1
        idle = self._idle.get(conn.key)
        if idle and conn in idle:
            idle.remove(conn)
        self._wake_one()

    def _close_one_idle(self) -> bool:
        for idle in self._idle.values():
            if idle:
                idle.pop(0).close()
                return True
        return False

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def close(self) -> None:
        for conn in [conn for idle in self._idle.values() for conn in idle]:
            conn.close()


def _address(base: str) -> tuple[_Key, bytes, bytes]:
    """(host, port, TLS), the Host header and the path prefix of an engine URL."""
    parts = urlsplit(base)
    tls = parts.scheme == "https"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EngineUnreachable(f"the engine URL {base!r} is not http(s)://host[:port]")
    port = parts.port or (443 if tls else 80)
    host = parts.netloc.rpartition("@")[2].encode("idna")
    return (parts.hostname, port, tls), host, parts.path.rstrip("/").encode("latin-1")
