"""Kernel receive stamps of socket reads (``SO_TIMESTAMPNS``): the one helper for them.

With the option set on a socket, every ``recvmsg`` also returns, as ancillary data, the
CLOCK_REALTIME instant the kernel received the bytes, however late the event loop reads them.
The load generator's HTTP layer (wire.py) times chunks with it. The simulator's ground truth
(gpu_agent/sim/wire.py) needs the same two definitions but may import only the scheduler
(docs/architecture.md#packages-and-what-they-may-import), so it keeps a copy that
tests/sim/test_kernel_stamps.py holds equal to this one.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable

# Linux values (asm-generic); Python does not export them.
SO_TIMESTAMPNS: int = getattr(socket, "SO_TIMESTAMPNS", 35)
TIMESPEC = struct.Struct("@qq")  # struct timespec: seconds, nanoseconds
ANCILLARY_SIZE = socket.CMSG_SPACE(TIMESPEC.size)  # recvmsg's ancbufsize for one stamp


def enable(sock: socket.socket) -> bool:
    """Ask the kernel to stamp this socket's reads; False where it cannot (not Linux)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def kernel_time(ancillary: Iterable[tuple[int, int, bytes]]) -> float | None:
    """The unix time in a read's ancillary data (recvmsg's second item), or None without one."""
    for level, kind, raw in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= TIMESPEC.size:
            sec, nsec = TIMESPEC.unpack_from(raw)
            return float(sec + nsec * 1e-9)
    return None
