"""The simulator's copy of the kernel-stamp helper equals the one definition, loadgen.kstamps
(gpu_agent may import only the scheduler, docs/architecture.md#packages-and-what-they-may-import),
and both read a real socket's stamp."""

from __future__ import annotations

import random
import socket
import struct
import time

from gpu_agent.sim import wire as sim_wire
from loadgen import kstamps


def test_the_constants_are_the_same() -> None:
    assert sim_wire.SO_TIMESTAMPNS == kstamps.SO_TIMESTAMPNS
    assert sim_wire.TIMESPEC.format == kstamps.TIMESPEC.format
    assert sim_wire.ANCILLARY_SIZE == kstamps.ANCILLARY_SIZE


def test_both_read_the_same_time_from_any_ancillary_data() -> None:
    rng = random.Random(7)
    kinds = [kstamps.SO_TIMESTAMPNS, 29, 36, 1]  # the stamp, SO_TIMESTAMP, ..., SCM_RIGHTS
    levels = [socket.SOL_SOCKET, socket.IPPROTO_TCP, socket.IPPROTO_IP]
    for _ in range(2000):
        ancillary = [
            (
                rng.choice(levels),
                rng.choice(kinds),
                struct.pack("@qq", rng.randrange(2**40), rng.randrange(10**9))[
                    : rng.choice([16, 16, 16, 8, 0])
                ],
            )
            for _ in range(rng.randrange(4))
        ]
        assert sim_wire.kernel_time(ancillary) == kstamps.kernel_time(ancillary), ancillary
    assert kstamps.kernel_time([]) is None
    assert kstamps.kernel_time([(socket.SOL_SOCKET, kstamps.SO_TIMESTAMPNS, bytes(16))]) == 0.0


def test_a_stamped_socket_reports_when_the_kernel_received_the_bytes() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        left = socket.create_connection(server.getsockname())
        right, _ = server.accept()
        with left, right:
            assert kstamps.enable(right)
            # Linux turns receive stamping on for the whole host through a deferred static key
            # when the first socket asks; a byte that lands before that work ran carries no
            # stamp (a loaded CI machine saw it). Wait until a byte comes back stamped.
            deadline = time.monotonic() + 5.0
            while True:
                left.sendall(b"w")
                _w, warm, _f, _a = right.recvmsg(16, kstamps.ANCILLARY_SIZE)
                if kstamps.kernel_time(warm) is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            before = time.time()
            left.sendall(b"x")  # loopback: received before sendall returns
            sent = time.time()
            time.sleep(0.05)  # read late: the stamp stays at the arrival
            _data, ancillary, _flags, _addr = right.recvmsg(16, kstamps.ANCILLARY_SIZE)
            stamp = kstamps.kernel_time(ancillary)
            assert stamp is not None and before <= stamp <= sent
            assert sim_wire.kernel_time(ancillary) == stamp
