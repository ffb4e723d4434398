"""One socket to the engine (gpu_agent/upstream.py keeps the pool): HTTP/1.1 over an asyncio
protocol, httptools (llhttp) for the response's framing, chunked transfer decoding included;
the body's pieces go to the handler as they arrive, in order, joined when several came in one
read. Reads are paused while the handler is far behind, so TCP holds the engine back as it
would for a direct client.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any, Protocol

import httptools

READ_HIGH = 256 * 1024  # bytes buffered for the handler before reads pause
Headers = list[tuple[bytes, bytes]]


class UpstreamError(Exception):
    """The exchange with the engine failed; the message says how."""


class EngineUnreachable(UpstreamError):
    """No connection to the engine could be opened."""


class PoolBusy(UpstreamError):
    """Every connection the pool may open is busy, and none came free in time."""


class Stale(UpstreamError):
    """A kept-alive connection the engine closed before answering: the pool retries once."""

    def __init__(self) -> None:
        super().__init__("the engine closed a kept-alive connection")


Key = tuple[str, int, bool]  # host, port, TLS


class Owner(Protocol):
    """What a connection needs of its pool."""

    loop: asyncio.AbstractEventLoop
    read_timeout_s: float

    def gone(self, conn: Connection) -> None: ...


class Connection(asyncio.Protocol):
    """One socket to the engine, one exchange at a time; while one runs it is its response:
    `status`, `headers` (names lower-cased), then `read()` or `async for` over the body."""

    def __init__(self, pool: Owner, key: Key) -> None:
        self.pool = pool
        self.key = key
        self.loop = pool.loop
        self.transport: Any = None  # uvloop's transport is not an asyncio.Transport
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.reused = False
        self.idle_since = 0.0
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
            self._fail(Stale())
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
            self._fail(Stale() if self.reused else UpstreamError("the connection is closed"))
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
        if self._paused:
            self._paused = False
            if not self.closed:
                self.transport.resume_reading()
        return data

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
        if self.closed:
            return
        self.closed = True
        self.pool.gone(self)
        if self.transport is not None:
            self.transport.close()
