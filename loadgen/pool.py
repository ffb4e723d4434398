"""The keep-alive pool: connections per (scheme, host, port), connect and TLS handshake.

Each socket gets ``SO_TIMESTAMPNS`` (receive times) and ``SO_TIMESTAMPING`` software transmit
times (when the request left) where the platform has them; wire.py does the exchanges. A
request cancelled while connecting or in the TLS handshake closes its socket.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from urllib.parse import urlsplit

from loadgen import kstamps
from loadgen.receive import KernelClock, TlsRecords
from loadgen.wire import (
    READ_SIZE,
    SO_TIMESTAMPING,
    TX_STAMP_FLAGS,
    ConnectError,
    Connection,
    Sink,
    StaleConnection,
    Tls,
    WireError,
    request_head,
)


class Pool:
    """Keep-alive connections per (scheme, host, port); no limit (the runner bounds requests)."""

    def __init__(
        self,
        ssl_context: ssl.SSLContext | None = None,
        *,
        clock: KernelClock | None = None,
        split_reads: bool = True,
    ) -> None:
        """``split_reads=False`` reads all that is queued at once, so the events of one read
        share its last segment's time (cheaper by a syscall per event; for measurement)."""
        self._idle: dict[tuple[str, str, int], list[Connection]] = {}
        self._all: set[Connection] = set()
        self._ssl_context = ssl_context
        self._split_reads = split_reads
        self.clock = clock or KernelClock()  # its `steps`: wall-clock steps seen
        self.kernel_stamps = True  # False once a socket refused SO_TIMESTAMPNS

    async def post(
        self, url: str, headers: dict[str, str], body: bytes, sink: Sink
    ) -> tuple[int, float, float]:
        """POST and stream the response into ``sink``: (status, sent, last read) times.

        A kept-alive connection the server has closed meanwhile is retried once on a new one
        (only when no byte of the response came). Raises WireError."""
        parts = urlsplit(url)
        scheme, host = parts.scheme, parts.hostname or ""
        port = parts.port or (443 if scheme == "https" else 80)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        netloc = host if parts.port is None else f"{host}:{port}"
        data = request_head("POST", target or "/", netloc, headers, len(body)) + body
        key = (scheme, host, port)
        for _attempt in range(2):
            conn = self._take_idle(key) or await self._connect(scheme, host, port)
            try:
                sent, last = await conn.exchange(data, sink)
            except StaleConnection:
                self._all.discard(conn)
                continue
            except BaseException:  # timeout, cancel: the response is unfinished
                conn.close()
                self._all.discard(conn)
                raise
            if conn.reusable:
                conn.reused = True
                conn._sink = None
                self._idle.setdefault(key, []).append(conn)
            else:
                conn.close()
                self._all.discard(conn)
            return conn.status, sent, last
        raise WireError("server closed the connection before responding")

    def _take_idle(self, key: tuple[str, str, int]) -> Connection | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if not conn.closed:
                return conn
            self._all.discard(conn)
        return None

    async def _connect(self, scheme: str, host: str, port: int) -> Connection:
        if scheme not in ("http", "https"):
            raise ConnectError(f"unsupported URL scheme {scheme!r}")
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ConnectError(f"Cannot connect to {host}:{port}: {exc}") from exc
        last: OSError | None = None
        for family, kind, proto, _name, addr in infos:
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                await loop.sock_connect(sock, addr)
            except OSError as exc:
                sock.close()
                last = exc
                continue
            except BaseException:  # cancelled (a timeout) while connecting
                sock.close()
                raise
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.kernel_stamps = _enable_stamps(sock) and self.kernel_stamps
                records = TlsRecords()
                tls = None
                if scheme == "https":
                    tls = await _handshake(sock, host, self._ssl_context, records)
                conn = Connection(sock, tls, self.clock, records, split_reads=self._split_reads)
                conn.tx_stamps = self.kernel_stamps and _enable_tx_stamps(sock)
            except BaseException:  # a failed or cancelled handshake
                sock.close()
                raise
            self._all.add(conn)
            return conn
        raise ConnectError(f"Cannot connect to {host}:{port}: {last}")

    def close(self) -> None:
        for conn in self._all:
            conn.close()
        self._all.clear()
        self._idle.clear()


_enable_stamps = kstamps.enable


def _enable_tx_stamps(sock: socket.socket) -> bool:
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, TX_STAMP_FLAGS)
    except OSError:
        return False
    return True


async def _handshake(
    sock: socket.socket, host: str, context: ssl.SSLContext | None, records: TlsRecords
) -> Tls:
    """The TLS handshake over the socket; ``records`` follows the record boundaries of what
    it reads, so the connection's reads can end where records end."""
    loop = asyncio.get_running_loop()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = (context or ssl.create_default_context()).wrap_bio(
        incoming, outgoing, server_hostname=host
    )
    try:
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                pass  # send what it has written, then read the server's answer
            out = outgoing.read()
            if out:
                await loop.sock_sendall(sock, out)
            data = await loop.sock_recv(sock, READ_SIZE)
            if not data:
                raise ConnectError(f"TLS handshake with {host}: connection closed")
            records.reads(data)
            incoming.write(data)
        out = outgoing.read()
        if out:
            await loop.sock_sendall(sock, out)
    except (ssl.SSLError, OSError) as exc:
        raise ConnectError(f"TLS handshake with {host} failed: {exc}") from exc
    return tls, incoming, outgoing
