"""Kernel receive times of requests, for the simulator's ground truth (--sim-wire-timestamps).

The handler of a request starts when the event loop gets to it; at 256 streams a step's burst
of writes holds the loop for milliseconds, so a handler-start "arrival" is late by the server's
own backlog and a client checked against it looks wrong by that much. With this listener every
accepted socket has ``SO_TIMESTAMPNS`` set and remembers, per read, when the kernel received the
bytes; the app looks the connection up by the client's address (ASGI ``scope["client"]``).

It needs the stock asyncio loop, whose transports read through the socket object (uvloop reads
in C); the server runs on it only in this mode.
"""

from __future__ import annotations

import socket
import struct
import time
import weakref
from collections.abc import Iterable
from typing import Any

# A copy of loadgen.kstamps (the one definition), since gpu_agent may import only the
# scheduler (docs/architecture.md#packages-and-what-they-may-import);
# tests/sim/test_kernel_stamps.py holds the two equal.
SO_TIMESTAMPNS: int = getattr(socket, "SO_TIMESTAMPNS", 35)
TIMESPEC = struct.Struct("@qq")  # struct timespec: seconds, nanoseconds
ANCILLARY_SIZE = socket.CMSG_SPACE(TIMESPEC.size)


def kernel_time(ancillary: Iterable[tuple[int, int, bytes]]) -> float | None:
    """The unix time in a read's ancillary data (recvmsg's second item), or None without one."""
    for level, kind, raw in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= TIMESPEC.size:
            sec, nsec = TIMESPEC.unpack_from(raw)
            return float(sec + nsec * 1e-9)
    return None


def _received(ancillary: list[tuple[int, int, bytes]]) -> float:
    stamp = kernel_time(ancillary)
    return time.time() if stamp is None else stamp


class _StampedSocket(socket.socket):
    """An accepted connection; ``received`` is the unix time its last read arrived."""

    received: float | None = None

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data, ancillary, _flags, _addr = self.recvmsg(bufsize, ANCILLARY_SIZE, flags)
        self.received = _received(ancillary)
        return data

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        view = memoryview(buffer)
        target = view[:nbytes] if nbytes else view
        n, ancillary, _flags, _addr = self.recvmsg_into([target], ANCILLARY_SIZE, flags)
        self.received = _received(ancillary)
        return n


class StampedListener(socket.socket):
    """A listening socket whose accepted connections carry kernel receive times."""

    def __init__(self, host: str, port: int) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__(family, socket.SOCK_STREAM)
        self.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.bind((host, port))
        self.listen(2048)
        self._by_peer: weakref.WeakValueDictionary[tuple[str, int], _StampedSocket] = (
            weakref.WeakValueDictionary()
        )

    def accept(self) -> tuple[socket.socket, Any]:
        fd, addr = self._accept()  # type: ignore[attr-defined]
        conn = _StampedSocket(self.family, self.type, self.proto, fileno=fd)
        if socket.getdefaulttimeout() is None and self.gettimeout():
            conn.setblocking(True)
        conn.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        # asyncio sets this only on sockets whose proto says TCP, and accept() gives proto 0:
        # without it Nagle holds each small chunk until the previous one is acknowledged.
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._by_peer[(str(addr[0]), int(addr[1]))] = conn
        return conn, addr

    def received(self, client: tuple[str, int] | list[Any] | None) -> float | None:
        """When the last bytes from ``client`` (an ASGI scope's "client") reached the kernel."""
        if not client:
            return None
        conn = self._by_peer.get((str(client[0]), int(client[1])))
        return conn.received if conn is not None else None
