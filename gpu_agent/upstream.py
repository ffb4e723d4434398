"""The hot path's client to the engine (docs/architecture.md#the-request-path): a keep-alive pool of
connections, each one socket speaking HTTP/1.1 (TLS for an https engine URL) over an asyncio
protocol with httptools (llhttp) for the response's framing (gpu_agent/upstream_conn.py).

aiohttp's client costs the gateway about a third of a millisecond per request before a byte
reaches the engine (its request object, a writer task, its stream reader); here the request
is one `transport.write` in the handler's own loop iteration, and the response's body pieces
go to the handler as they arrive. The control plane (/v1/models, /metrics, the sampler) keeps
its aiohttp session.

Errors: `UpstreamError`, and its `EngineUnreachable` when no connection could be opened (the
gateway's 503 engine_down), and its `PoolBusy` when every connection the pool may open is busy
for `acquire_timeout_s` (503 upstream_busy). Leaving `post`'s context early (cancelled, the
client gone, an error) closes the socket, so the engine aborts the request; a response read to
its end leaves the connection in the pool. A kept-alive connection the engine closed before
answering (its idle timeout racing our request) is retried once on a new one.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Iterable
from urllib.parse import urlsplit

from gpu_agent.upstream_conn import READ_HIGH as READ_HIGH
from gpu_agent.upstream_conn import Connection as Connection
from gpu_agent.upstream_conn import EngineUnreachable as EngineUnreachable
from gpu_agent.upstream_conn import Key as _Key
from gpu_agent.upstream_conn import PoolBusy as PoolBusy
from gpu_agent.upstream_conn import Stale as _Stale
from gpu_agent.upstream_conn import UpstreamError as UpstreamError


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
        acquire_timeout_s: float | None = None,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.limit = limit
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        # When every connection the pool may open is busy, a request waits for one of them to
        # finish at the engine: bounded as the engine's first byte is (by default).
        self.acquire_timeout_s = read_timeout_s if acquire_timeout_s is None else acquire_timeout_s
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
        deadline: float | None = None  # set at the first wait: the fast paths arm no timer
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
                if deadline is None:
                    deadline = self.loop.time() + self.acquire_timeout_s
                waiter = self.loop.create_future()
                self._waiters.append(waiter)
                try:
                    async with asyncio.timeout_at(deadline):
                        await waiter
                except BaseException as exc:
                    if waiter.done() and not waiter.cancelled():
                        self._wake_one()  # woken, then cancelled: the turn passes on
                    elif waiter in self._waiters:  # _wake_one may have dropped it, cancelled
                        self._waiters.remove(waiter)
                    if isinstance(exc, TimeoutError):
                        raise PoolBusy(
                            f"all {self.limit} connections to the engine stayed busy for "
                            f"{self.acquire_timeout_s:g} s"
                        ) from None
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
