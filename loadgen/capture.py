"""Wire truth from a packet capture: when each request and each streamed event crossed the wire.

The check behind the load generator's timing (tests/loadgen/test_capture.py, ``lab/
bench_loadgen.py capture``): tcpdump records the traffic between the client and a server on
loopback, and the times in the capture, taken by the kernel as each segment arrived, are the
ground truth the client's TTFT and ITL are compared with.

- ``read_pcap(path)``: the TCP segments of a classic pcap file (micro- or nanosecond stamps;
  Ethernet, Linux cooked v1/v2 or raw IP link types; IPv4 and IPv6), in capture order.
- ``exchanges(segments, server_port)``: per HTTP exchange, the time of the segment that
  completed the request and of the segment that completed each SSE event of the response
  (HTTP framing by httptools, SSE framing by ``loadgen.sse``), with the response ``id`` and
  which events carried content.
- ``compare(samples, wire)``: TTFT and per-gap ITL errors of the client's samples, matched to
  the capture by response id, and how many merged chunks the kernel could not have merged;
  ``error_ms(errors)`` summarises them.
- ``tcpdump(path, port)``: a context manager running tcpdump on loopback for one port.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import struct
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httptools

from loadgen.sse import SSEDecoder
from loadgen.stats import distribution
from loadgen.types import RequestSample

_PCAP_MAGIC = {0xA1B2C3D4: 1e-6, 0xA1B23C4D: 1e-9}  # per file, microsecond or nanosecond stamps
# link type -> bytes before the IP header (None: a field decides)
_LINK_HEADER = {1: 14, 113: 16, 276: 20, 101: 0, 228: 0, 229: 0}
_TCP = 6


class CaptureError(Exception):
    """The capture cannot be read, or misses part of a stream."""


@dataclass(frozen=True, slots=True)
class Segment:
    time: float  # unix seconds, as the kernel stamped the packet
    src_port: int
    dst_port: int
    seq: int
    ack: int | None  # None without the ACK flag
    syn: bool
    payload: bytes


def read_pcap(path: str | Path) -> list[Segment]:
    raw = Path(path).read_bytes()
    if len(raw) < 24:
        raise CaptureError(f"{path}: not a pcap file (too short)")
    for order in ("<", ">"):
        (magic,) = struct.unpack_from(order + "I", raw)
        if magic in _PCAP_MAGIC:
            break
    else:
        raise CaptureError(f"{path}: not a classic pcap file (pcapng is not read)")
    tick = _PCAP_MAGIC[magic]
    linktype = struct.unpack_from(order + "I", raw, 20)[0] & 0x0FFFFFFF
    if linktype not in _LINK_HEADER:
        raise CaptureError(f"{path}: link type {linktype} is not read")
    record = struct.Struct(order + "IIII")
    segments = []
    offset = 24
    while offset + record.size <= len(raw):
        sec, frac, caplen, _length = record.unpack_from(raw, offset)
        offset += record.size
        frame = raw[offset : offset + caplen]
        offset += caplen
        segment = _tcp_segment(frame, linktype, sec + frac * tick)
        if segment is not None:
            segments.append(segment)
    return segments


def _tcp_segment(frame: bytes, linktype: int, stamp: float) -> Segment | None:
    ip = frame[_LINK_HEADER[linktype] :]
    if not ip:
        return None
    version = ip[0] >> 4
    if version == 4:
        header = (ip[0] & 0x0F) * 4
        total = struct.unpack_from("!H", ip, 2)[0]
        if ip[9] != _TCP:
            return None
        tcp = ip[header:total]
    elif version == 6:
        if ip[6] != _TCP:  # extension headers do not occur on loopback
            return None
        tcp = ip[40 : 40 + struct.unpack_from("!H", ip, 4)[0]]
    else:
        return None
    src, dst, seq, ack = struct.unpack_from("!HHII", tcp)
    flags = tcp[13]
    payload = tcp[(tcp[12] >> 4) * 4 :]
    return Segment(stamp, src, dst, seq, ack if flags & 0x10 else None, bool(flags & 2), payload)


def _stream(segments: Sequence[Segment]) -> Iterator[tuple[float, bytes, int]]:
    """One direction of one connection: its new payload bytes in order, each with the time of
    the segment that carried them and the sequence number after them (retransmitted bytes are
    dropped, a hole is an error)."""
    expected: int | None = None
    for seg in segments:
        if seg.syn:
            expected = (seg.seq + 1) & 0xFFFFFFFF
            continue
        if not seg.payload:
            continue
        if expected is None:
            expected = seg.seq  # the capture started after the handshake
        skip = (expected - seg.seq) & 0xFFFFFFFF
        if skip >= 1 << 31:
            raise CaptureError(f"a segment is missing before seq {seg.seq} (capture dropped it?)")
        if skip >= len(seg.payload):
            continue
        data = seg.payload[skip:]
        expected = (expected + len(data)) & 0xFFFFFFFF
        yield seg.time, data, expected


@dataclass(slots=True)
class WireExchange:
    """One request and its response as seen on the wire (unix times)."""

    client_port: int
    request_time: float  # the segment that completed the request
    status: int = 0
    response_id: str | None = None
    event_times: list[float] = field(default_factory=list)  # every SSE event, in order
    content_times: list[float] = field(default_factory=list)  # those with a content delta
    content_ends: list[int] = field(default_factory=list)  # seq after each one's segment
    acks: list[tuple[float, int]] = field(default_factory=list)  # the client's, on this socket

    @property
    def ttft(self) -> float | None:
        return self.content_times[0] - self.request_time if self.content_times else None

    @property
    def itl(self) -> list[float]:
        return [b - a for a, b in itertools.pairwise(self.content_times)]

    def kernel_could_merge(self, first: int, last: int) -> bool:
        """Could content chunks ``first``..``last`` have reached the client's socket as one
        buffer? The kernel merges an arriving segment into the unread one before it once that
        one is no longer shared with the sender (acknowledged; on loopback the sender's copy
        goes with the ACK), and a buffer that has taken one in keeps taking the next. So: yes
        when the chunks share one segment up to some chunk whose segment the client had
        acknowledged before the next one arrived."""
        ends, times = self.content_ends, self.content_times
        for i in range(first, last):
            if ends[i + 1] == ends[i]:
                continue  # one segment carried both
            return any(t < times[i + 1] and _seq_le(ends[i], ack) for t, ack in self.acks)
        return True


def _seq_le(a: int, b: int) -> bool:
    return ((b - a) & 0xFFFFFFFF) < 1 << 31


class _Messages:
    """httptools callbacks: counts completed messages; the response side keeps the body."""

    def __init__(self) -> None:
        self.completed = 0
        self.body: list[bytes] = []
        self.headers_done = False

    def on_headers_complete(self) -> None:
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.completed += 1


def _request_times(segments: Sequence[Segment]) -> list[float]:
    messages = _Messages()
    parser = httptools.HttpRequestParser(messages)
    times: list[float] = []
    for stamp, data, _end in _stream(segments):
        parser.feed_data(data)
        times.extend([stamp] * (messages.completed - len(times)))
    return times


def _responses(segments: Sequence[Segment], port: int) -> list[WireExchange]:
    messages = _Messages()
    parser = httptools.HttpResponseParser(messages)
    done: list[WireExchange] = []
    current = WireExchange(port, 0.0)
    decoder = SSEDecoder()
    for stamp, data, end in _stream(segments):
        before = messages.completed
        parser.feed_data(data)
        if messages.headers_done and not current.status:
            current.status = parser.get_status_code()
        for event in decoder.feed(b"".join(messages.body)):
            _add_event(current, event.data, stamp, end)
        messages.body.clear()
        if messages.completed > before:
            done.append(current)
            current, decoder = WireExchange(port, 0.0), SSEDecoder()
            messages.headers_done = False
    return done


def _add_event(exchange: WireExchange, data: str, stamp: float, end: int) -> None:
    exchange.event_times.append(stamp)
    try:
        obj: Any = json.loads(data)
    except ValueError:
        return
    if not isinstance(obj, dict):
        return
    if exchange.response_id is None and isinstance(obj.get("id"), str):
        exchange.response_id = obj["id"][:200]  # as the client keeps it
    choices = obj.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else {}
    choice = choice if isinstance(choice, dict) else {}
    delta = choice.get("delta")
    delta = delta if isinstance(delta, dict) else {}
    if delta.get("content") or choice.get("text"):
        exchange.content_times.append(stamp)
        exchange.content_ends.append(end)


def exchanges(segments: Sequence[Segment], server_port: int) -> list[WireExchange]:
    """Every complete exchange with the server on ``server_port``, in capture order."""
    by_conn: dict[int, tuple[list[Segment], list[Segment]]] = {}
    for seg in segments:
        if seg.dst_port == server_port:
            by_conn.setdefault(seg.src_port, ([], []))[0].append(seg)
        elif seg.src_port == server_port:
            by_conn.setdefault(seg.dst_port, ([], []))[1].append(seg)
    found = []
    for port, (upstream, downstream) in by_conn.items():
        requests = _request_times(upstream)
        acks = [(seg.time, seg.ack) for seg in upstream if seg.ack is not None]
        for request_time, exchange in zip(requests, _responses(downstream, port), strict=False):
            exchange.request_time = request_time
            exchange.acks = acks
            found.append(exchange)
    return sorted(found, key=lambda e: e.request_time)


@dataclass(slots=True)
class Comparison:
    """Client minus wire, in seconds, over the samples matched to the capture by response id.

    ``*_trusted`` leave out what the client itself marks as not a wire time (receive.py): a
    first token that shares its kernel time with the next chunk, an ITL gap of exactly zero
    (two chunks with one kernel time) and the gap before each run of such zeros."""

    matched: int = 0
    unmatched: int = 0
    chunk_count_mismatch: int = 0  # samples whose content-chunk count differs from the wire's
    ttft_errors: list[float] = field(default_factory=list)
    ttft_errors_trusted: list[float] = field(default_factory=list)
    itl_errors: list[float] = field(default_factory=list)
    itl_errors_trusted: list[float] = field(default_factory=list)
    merged_gaps: int = 0  # zero gaps the client reported
    merged_not_by_kernel: int = 0  # of those, chunks the kernel had kept apart (client's own)


def compare(samples: Sequence[RequestSample], wire: Sequence[WireExchange]) -> Comparison:
    """Needs each sample's raw ITL gaps (``keep_itl_raw``)."""
    by_id = {w.response_id: w for w in wire if w.response_id is not None}
    out = Comparison()
    for sample in samples:
        truth = by_id.get(sample.response_id or "")
        if not sample.ok or sample.ttft is None or truth is None or truth.ttft is None:
            out.unmatched += 1
            continue
        out.matched += 1
        error = sample.ttft - truth.ttft
        out.ttft_errors.append(error)
        if not sample.first_token_merged:
            out.ttft_errors_trusted.append(error)
        gaps = sample.itl_raw or []
        if len(gaps) != len(truth.itl):
            out.chunk_count_mismatch += 1
            continue
        run_start: int | None = None  # first chunk of a run of chunks with one kernel time
        for i, (gap, true_gap) in enumerate(zip(gaps, truth.itl, strict=True)):
            out.itl_errors.append(gap - true_gap)
            if gap == 0.0:
                out.merged_gaps += 1
                run_start = i if run_start is None else run_start
                if i + 1 == len(gaps) or gaps[i + 1] != 0.0:  # the run ends with chunk i+1
                    if not truth.kernel_could_merge(run_start, i + 1):
                        out.merged_not_by_kernel += i + 1 - run_start
                    run_start = None
            elif i + 1 >= len(gaps) or gaps[i + 1] != 0.0:
                out.itl_errors_trusted.append(gap - true_gap)
    return out


def error_ms(errors: Sequence[float]) -> dict[str, float | None]:
    """p50 / p99 / max of the absolute errors, in milliseconds (the summaries' percentile)."""
    dist = distribution(abs(e) for e in errors)
    return {
        k: None if dist[k] is None else round(float(dist[k] or 0.0) * 1e3, 3)
        for k in ("p50", "p99", "max")
    }


def tcpdump_path() -> str:
    found = shutil.which("tcpdump") or next(
        (p for p in ("/usr/sbin/tcpdump", "/usr/bin/tcpdump") if Path(p).exists()), None
    )
    if found is None:
        raise CaptureError("tcpdump is not installed (Debian: apt-get install tcpdump)")
    return found


@contextlib.contextmanager
def tcpdump(
    path: str | Path, port: int, *, interface: str = "lo", cpus: set[int] | None = None
) -> Iterator[Path]:
    """Capture TCP traffic of ``port`` on ``interface`` into ``path`` until the block ends
    (nanosecond stamps, whole packets, each written as it comes); ``cpus`` pins tcpdump."""
    command = [
        tcpdump_path(),
        *("-i", interface, "-w", str(path), "-U", "--immediate-mode", "-s", "0", "-n"),
        *("-B", "32768", "--time-stamp-precision", "nano", "tcp", "port", str(port)),
    ]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert proc.stderr is not None
    try:
        if cpus is not None:
            os.sched_setaffinity(proc.pid, cpus)
        line = proc.stderr.readline().decode(errors="replace")  # "listening on lo, ..."
        if "listening on" not in line:
            proc.wait(timeout=10)
            rest = proc.stderr.read().decode(errors="replace")
            raise CaptureError(f"tcpdump did not start: {line}{rest}")
        yield Path(path)
        _settle(Path(path))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            tail = proc.communicate(timeout=10)[1].decode(errors="replace")
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
    dropped = [ln for ln in tail.splitlines() if "dropped by kernel" in ln]
    if dropped and not dropped[0].startswith("0 "):
        raise CaptureError(f"tcpdump lost packets: {dropped[0]}")


def _settle(path: Path, quiet_s: float = 0.3, limit_s: float = 10.0) -> None:
    """Wait until tcpdump has written what it captured: the file stops growing."""
    deadline = time.monotonic() + limit_s
    size = -1
    while time.monotonic() < deadline:
        now = path.stat().st_size if path.exists() else 0
        if now == size:
            return
        size = now
        time.sleep(quiet_s)
