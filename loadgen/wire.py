"""HTTP/1.1 exchanges whose every event carries the kernel's receive time.

A client that timestamps a token when its event loop gets round to it reports its own lag as
the server's latency: 256 streams stepping in lockstep deliver 256 chunks in one burst, and the
last of them is handled milliseconds after it arrived (more when another process holds the
core). Here each socket has ``SO_TIMESTAMPNS`` set, so the time a chunk is stamped with is when
the kernel received it, however late the loop reads it. A ``recvmsg`` reports only the time of
the last segment it read, so each wake-up peeks at what is queued and reads it in pieces that
end where SSE events (TLS: records) end, each piece with its own segment's time (receive.py).
Where the option is missing (not Linux) the read time is used instead.

Framing is httptools (llhttp); this module does the socket I/O, TLS through ``ssl.SSLObject``
and a keep-alive pool. The caller gets status and body pieces through a sink, each piece with
the receive time of the read that completed it, on the ``time.perf_counter`` clock.
Informational responses (``100 Continue``) are skipped; the final response is the exchange's.

Errors: ``WireError`` (the message is what the sample records) and its ``ConnectError``; a
request cancelled at any point (a timeout) closes its socket.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Callable

import httptools

from loadgen import kstamps
from loadgen.receive import KEEP_TAIL, KernelClock, TlsRecords, event_reads

READ_SIZE = 256 * 1024
_TIMESPEC = kstamps.TIMESPEC
# Transmit times (SO_TIMESTAMPING, software stamps, no payload copy): when the request left.
SO_TIMESTAMPING = getattr(socket, "SO_TIMESTAMPING", 37)
TX_STAMP_FLAGS = (1 << 1) | (1 << 4) | (1 << 11)  # TX_SOFTWARE | SOFTWARE | OPT_TSONLY
# Reads then carry both SCM_TIMESTAMPNS and SCM_TIMESTAMPING (three timespecs).
ANC_SIZE = socket.CMSG_SPACE(_TIMESPEC.size) + socket.CMSG_SPACE(3 * _TIMESPEC.size)
ERRQUEUE_ANC_SIZE = 512

# (status, body piece, receive time) -> True to stop reading this response
Sink = Callable[[int, bytes, float], bool]


class WireError(Exception):
    """A failed exchange; the message is what the sample records."""


class ConnectError(WireError):
    pass


def request_head(
    method: str, target: str, host: str, headers: dict[str, str], length: int
) -> bytes:
    """The request line and headers; a value with a line break (header injection) or a
    character Latin-1 cannot hold (HTTP/1.1 carries bytes, not text) is refused."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", f"Content-Length: {length}"]
    for name, value in headers.items():
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
            raise WireError(f"header {name!r} contains a line break")
        lines.append(f"{name}: {value}")
    head = "\r\n".join(lines) + "\r\n\r\n"
    try:
        return head.encode("latin-1")
    except UnicodeEncodeError:
        for name, value in headers.items():
            try:
                f"{name}: {value}".encode("latin-1")
            except UnicodeEncodeError:
                raise WireError(f"header {name!r} has characters outside Latin-1") from None
        raise WireError(f"URL {target!r} has characters outside Latin-1") from None


Tls = tuple[ssl.SSLObject, ssl.MemoryBIO, ssl.MemoryBIO]


class Connection:
    """One socket; at most one exchange at a time. Reads run in a reader callback, so the
    parser and the sink see each read as it happens, stamped with its arrival time."""

    def __init__(
        self,
        sock: socket.socket,
        tls: Tls | None,
        clock: KernelClock,
        records: TlsRecords | None = None,
        *,
        split_reads: bool = True,
    ) -> None:
        self.sock = sock
        self.tls: ssl.SSLObject | None = tls[0] if tls else None
        self.incoming: ssl.MemoryBIO | None = tls[1] if tls else None
        self.outgoing: ssl.MemoryBIO | None = tls[2] if tls else None
        self.clock = clock
        self.split_reads = split_reads
        self.tx_stamps = False  # the kernel reports when each send left (SO_TIMESTAMPING)
        self._tx_kernel: float | None = None
        self._first_stamp: float | None = None  # of this exchange's first read
        self.records = records if tls is not None else None
        self._tail = b""  # the last bytes read, for an event end split across reads
        self._sent = 0.0
        self.loop = asyncio.get_running_loop()
        self.closed = False
        self.reused = False
        self._parser: httptools.HttpResponseParser | None = None
        self._sink: Sink | None = None
        self._done: asyncio.Future[None] | None = None
        self._stamp = 0.0
        self._rest: asyncio.Task[None] | None = None
        self._got_bytes = False
        self._complete = False
        self.status = 0
        self.keep_alive = False
        self.loop.add_reader(sock.fileno(), self._readable)

    # -- reading ------------------------------------------------------------------------------

    def _readable(self) -> None:
        # Peek first, then read in pieces that each end where an event (or TLS record) ends:
        # each piece carries the time of its own last segment (receive.py).
        if self.tx_stamps and self._tx_kernel is None:
            self._take_tx_stamps()
        try:
            queued, anc, _flags, _addr = self.sock.recvmsg(READ_SIZE, ANC_SIZE, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            if self.tx_stamps:
                self._take_tx_stamps()  # woken by the error queue alone (a later send's time)
            return
        except OSError as exc:
            self._read_failed(exc)
            return
        if not queued:
            self._eof()
            return
        # The time of the last segment queued now. A segment arriving between this peek and
        # the reads may be merged into that one and give it its later time: no piece of what
        # was peeked can have come later than this.
        peeked = _kernel_time(anc)
        now, offset = self.clock.wake()
        if not self.split_reads:
            sizes = [len(queued)]
        elif self.records is not None:
            sizes = self.records.reads(queued)
        else:
            sizes = event_reads(queued, self._tail)
            self._tail = queued[-KEEP_TAIL:]
        left = len(queued)
        for size in sizes:
            try:
                if size == left:
                    # The last piece ends in the newest segment peeked: its time is the peek's.
                    data, kernel = self.sock.recv(size), peeked
                else:
                    data, anc, _flags, _addr = self.sock.recvmsg(size, ANC_SIZE)
                    kernel = _kernel_time(anc)
                    if kernel is not None and peeked is not None and kernel >= peeked:
                        # This piece ended in the newest segment, so does all that is left:
                        # one read for the rest, with that segment's time.
                        kernel = peeked
                        data += self.sock.recv(left - size)
            except OSError as exc:
                self._read_failed(exc)
                return
            left -= len(data)
            self._stamp = self.clock.place(kernel, now, offset, self._sent)
            if self._first_stamp is None:
                self._first_stamp = self._stamp
            if self.tls is not None:
                plain = self._decrypt(data)
                if plain is not None:
                    self._feed(plain)
            else:
                self._feed(data)
            if self.closed or self._parser is None or not left:
                return  # failed, stopped, the response complete, or all read

    def _take_tx_stamps(self) -> None:
        """Drain the error queue, keeping the latest transmit time (the request's last byte:
        exchanges on a connection do not overlap)."""
        while True:
            try:
                _d, anc, _f, _a = self.sock.recvmsg(0, ERRQUEUE_ANC_SIZE, socket.MSG_ERRQUEUE)
            except OSError:  # empty (BlockingIOError) or gone: nothing (more) to take
                return
            for level, kind, raw in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING:
                    sec, nsec = _TIMESPEC.unpack_from(raw)
                    self._tx_kernel = float(sec + nsec * 1e-9)

    def _read_failed(self, exc: OSError) -> None:
        stale = self.reused and not self._got_bytes
        self._fail(StaleConnection() if stale else WireError(f"read failed: {exc}"))

    def _feed(self, data: bytes) -> None:
        if self._parser is None:
            # Bytes while idle: the server is not keeping to HTTP; do not reuse this socket.
            self.close()
            return
        self._got_bytes = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(WireError(f"invalid HTTP response: {exc}"))

    def _decrypt(self, data: bytes) -> bytes | None:
        assert self.tls is not None and self.incoming is not None
        self.incoming.write(data)
        pieces: list[bytes] = []
        while True:
            try:
                piece = self.tls.read(READ_SIZE)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                piece = b""
            except ssl.SSLError as exc:
                self._fail(WireError(f"TLS error: {exc}"))
                return None
            if not piece:  # the server's close_notify
                if pieces:
                    self._feed(b"".join(pieces))
                self._eof()
                return None
            pieces.append(piece)
        return b"".join(pieces) or None

    def _eof(self) -> None:
        if self._done is None or self._done.done():
            self.close()
            return
        if not self._got_bytes and self.reused:
            self._fail(StaleConnection())
        elif self._parser is not None and self.status and not self._complete:
            # A body delimited by the close: what came is the body; the caller judges it.
            self._complete = True
            self.keep_alive = False
            self._finish()
        else:
            self._fail(WireError("server closed the connection before responding"))

    # httptools callbacks
    def on_status(self, status: bytes) -> None:
        assert self._parser is not None
        self.status = self._parser.get_status_code()

    def on_headers_complete(self) -> None:
        assert self._parser is not None
        self.status = self._parser.get_status_code()
        self.keep_alive = self._parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        assert self._sink is not None
        try:
            stop = self._sink(self.status, body, self._stamp)
        except Exception as exc:  # the caller's bug or a body it cannot take: this request's error
            self._fail(WireError(f"handling the response failed: {type(exc).__name__}: {exc}"))
            return
        if stop:
            self.keep_alive = False
            self._finish()

    def on_message_complete(self) -> None:
        if 100 <= self.status < 200 and self.status != 101:
            # An informational response (100 Continue, 103 Early Hints): the final response
            # follows on the same connection, through the same parser.
            self.status = 0
            return
        self._complete = True
        self._finish()

    def _finish(self) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(None)
        self._parser = None

    def _fail(self, exc: Exception) -> None:
        done = self._done
        self.close()
        if done is not None and not done.done():
            done.set_exception(exc)

    # -- one exchange ---------------------------------------------------------------------------

    async def exchange(self, data: bytes, sink: Sink) -> tuple[float, float]:
        """Send the request, feed the response to ``sink``; returns (sent, last read) times."""
        self._parser = httptools.HttpResponseParser(self)
        self._sink, self._done = sink, self.loop.create_future()
        self._got_bytes = self._complete = False
        self._first_stamp = None
        self.status = 0
        if self.tls is not None:
            self.tls.write(data)
            data = self.outgoing.read() if self.outgoing is not None else b""
        if self.tx_stamps:
            self._take_tx_stamps()  # earlier sends' (the TLS handshake's)
            self._tx_kernel = None
        try:
            sent = self._sent = self._send(data)
        except OSError as exc:
            self.close()
            if self.reused:
                raise StaleConnection() from exc
            raise WireError(f"write failed: {exc}") from exc
        if self.tx_stamps:
            self._take_tx_stamps()  # on loopback it is there already; else with the reply
        await self._done
        if self._tx_kernel is not None:
            # When the request's last byte left, not when this process called send: a
            # preemption between the two (tens of ms on a starved core) is not latency.
            now, offset = self.clock.wake()
            first = self._first_stamp if self._first_stamp is not None else now
            sent = self.clock.place(self._tx_kernel, first, offset, sent)
        return sent, self._stamp

    def _send(self, data: bytes) -> float:
        # Stamped just before the syscall, not after: the send wakes the server, which on a
        # busy machine may run before this process does again.
        sent = time.perf_counter()
        try:
            n = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            n = 0
        if n < len(data):  # a full socket buffer (a huge prompt): the rest goes out as it drains
            self._rest = self.loop.create_task(self._send_rest(data[n:]))
        return sent

    async def _send_rest(self, data: bytes) -> None:
        try:
            await self.loop.sock_sendall(self.sock, data)
        except OSError as exc:
            self._fail(WireError(f"write failed: {exc}"))

    @property
    def reusable(self) -> bool:
        return not self.closed and self._complete and self.keep_alive

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._parser = None
        if self._rest is not None:
            self._rest.cancel()
        self.loop.remove_reader(self.sock.fileno())
        self.sock.close()


class StaleConnection(WireError):
    """A kept-alive socket the server had closed: retried once on a new one."""

    def __init__(self) -> None:
        super().__init__("server closed a kept-alive connection")


_kernel_time = kstamps.kernel_time
