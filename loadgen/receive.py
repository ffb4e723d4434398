"""Per-event receive times (sans-I/O): where to cut reads, and kernel stamps onto perf_counter.

A ``recvmsg`` on a TCP socket with ``SO_TIMESTAMPNS`` reports one time, that of the last
segment it took bytes from. A client that was descheduled while several events arrived, and
then read them in one call, would give all of them the last one's time and report their gaps
as zero. So wire.py first peeks at what is queued and then reads it in pieces that each end
where an event ends (``event_reads``; for TLS, where a record ends: ``TlsRecords``): each
event gets the time of the segment that completed it.

What no read can undo: TCP merges a segment into the one before it in the receive queue when
that one is still unread (and no longer shared with the sender), keeping the later time. Two
events with one kernel time were sent together or merged while the socket went unread; the
client counts them (``RequestSample.merged_gaps``) and the run's validity names the figures
they make untrustworthy.

Kernel times are on CLOCK_REALTIME. ``KernelClock`` reads the wall clock and ``perf_counter``
together at every wake-up and moves each stamp across by that offset. When the offset jumps
between two wake-ups (a wall-clock step, counted in ``steps``), a stamp queued around the step
may be on either side of it: for a while both offsets are tried and the one that puts the
stamp between the request's send and the read is used (both fit only for a step shorter than
that wait: then the new one, wrong by at most the step). Every stamp is held between the send
and the read, so no step can make a latency negative or larger than the client saw.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

# An SSE event ends with a blank line; servers end lines with LF (vLLM and most) or CRLF.
_EVENT_END = re.compile(rb"\n\n|\r\n\r\n")
KEEP_TAIL = 3  # bytes of the previous read that may start an event end split across reads
# Bytes after the last event end that belong to the same write: the chunk's closing CRLF.
_SAME_WRITE = (b"", b"\r\n")


def event_reads(data: bytes, before: bytes = b"") -> list[int]:
    """Lengths of consecutive reads of ``data`` (queued bytes, as peeked) that end at each SSE
    event end; ``before`` is the end of what was read earlier, for an end split across reads.
    Extra cuts are harmless (more reads); bytes past the last event end, unless they are only
    the chunk's CRLF, are a read of their own, since they may have come later."""
    # The common case first (a client keeping up): one LF-delimited event, whole.
    if (
        data.count(b"\n\n") == 1
        and (data.endswith(b"\n\n\r\n") or data.endswith(b"\n\n"))
        and b"\r\n\r\n" not in data
        and not (data[:1] == b"\n" and before[-1:] == b"\n")
    ):
        return [len(data)]
    skip = len(before)
    ends = [m.end() - skip for m in _EVENT_END.finditer(before + data) if m.end() > skip]
    if not ends:
        return [len(data)]
    if data[ends[-1] :] in _SAME_WRITE:
        ends[-1] = len(data)
    else:
        ends.append(len(data))
    return [b - a for a, b in zip([0, *ends], ends, strict=False)]


class TlsRecords:
    """Follows TLS record boundaries in the ciphertext stream (header: type, version, 2-byte
    length), so that reads of a TLS socket end where records end."""

    __slots__ = ("_header", "_left")

    def __init__(self) -> None:
        self._left = 0  # bytes of the current record's body not yet read
        self._header = b""  # bytes of the next record's header read so far

    def reads(self, data: bytes) -> list[int]:
        """Read lengths for ``data`` that end at every record end in it; updates the state
        as though all of ``data`` is read."""
        cuts: list[int] = []
        pos, size = 0, len(data)
        while pos < size:
            if self._left:
                take = min(self._left, size - pos)
                pos += take
                self._left -= take
                if not self._left:
                    cuts.append(pos)
                continue
            piece = data[pos : pos + 5 - len(self._header)]
            self._header += piece
            pos += len(piece)
            if len(self._header) == 5:
                self._left = int.from_bytes(self._header[3:5], "big")
                self._header = b""
                if not self._left:
                    cuts.append(pos)
        if not cuts or cuts[-1] != size:
            cuts.append(size)
        return [b - a for a, b in zip([0, *cuts], cuts, strict=False)]


class KernelClock:
    """Moves kernel receive times (unix seconds) onto the ``perf_counter`` clock.

    ``wake()`` at every wake-up samples the offset between the two clocks (the wall clock read
    on both sides of ``perf_counter``, again if a preemption came between them) and notices a
    step; ``place(kernel, now, earliest)`` converts one stamp. The clock functions can be
    replaced (tests simulate a wall-clock step)."""

    # NTP slews by at most 500 ppm; a larger move of the offset between two wake-ups is a step.
    SLEW = 500e-6
    TOLERANCE_S = 1e-3
    # The wall clock read on both sides of perf_counter within this counts as read with it; a
    # wider pair (a preemption between the reads) is not used to move the offset.
    PAIR_S = 5e-6
    TRIES = 4
    # The offset in use moves only when a sample differs by more than this, so that one kernel
    # time read in two wake-ups converts to the same value (which is how merges are seen).
    REANCHOR_S = 20e-6
    # After a step, stamps are tried against the offset before it for this long (bytes queued
    # before the step are read within it unless the client stalls for longer).
    STEP_GRACE_S = 10.0
    # The offset is sampled at most this often (three clock reads); a step is seen at the
    # next sample, and stamps read meanwhile are still held between send and read.
    SAMPLE_EVERY_S = 5e-3

    def __init__(
        self,
        perf: Callable[[], float] = time.perf_counter,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._perf, self._wall = perf, wall
        self._offset: float | None = None
        self._before_step: float | None = None  # the offset before the latest step
        self._step_at = 0.0
        self._at = 0.0
        self.steps = 0

    def wake(self) -> tuple[float, float]:
        """(perf_counter now, wall minus perf_counter now)."""
        perf, wall = self._perf, self._wall
        if self._offset is not None:
            now = perf()
            if now - self._at < self.SAMPLE_EVERY_S:
                return now, self._offset
        for _ in range(self.TRIES):
            before = wall()
            now = perf()
            after = wall()
            if after - before < self.PAIR_S:
                break
        else:  # preempted between the reads every time: keep the offset in use
            if self._offset is not None:
                return now, self._offset
        sample = (before + after) / 2 - now
        last = self._offset
        moved = abs(sample - last) if last is not None else 0.0
        if moved > self.TOLERANCE_S + self.SLEW * (now - self._at):
            self.steps += 1
            self._before_step, self._step_at = last, now
        elif self._before_step is not None and now - self._step_at > self.STEP_GRACE_S:
            self._before_step = None
        if last is None or moved > self.REANCHOR_S:
            self._offset = sample
        self._at = now
        return now, self._offset if self._offset is not None else sample

    def place(self, kernel: float | None, now: float, offset: float, earliest: float) -> float:
        """A kernel time on perf_counter, held between ``earliest`` (the send) and ``now``
        (the read); the read time itself where there is no stamp."""
        if kernel is None:
            return now
        placed = kernel - offset
        if self._before_step is not None and not earliest <= placed <= now:
            older = kernel - self._before_step
            if earliest <= older <= now:
                return older  # received before the step
        return min(now, max(earliest, placed))
