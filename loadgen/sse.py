"""Incremental, strict Server-Sent Events decoder (sans-I/O).

Follows the WHATWG "event stream interpretation" rules that matter for OpenAI-style streams:
lines end in CRLF, LF or CR (a CR at the end of one read may be followed by the LF of the
next, so it is held back); a line starting with ":" is a comment; `field: value` strips one
leading space; several `data:` lines of one event join with "\\n"; an empty line dispatches
the event; an event with no `data:` line is dropped, while a bare `data:` (the buffer holds
one LF) dispatches an event whose data is ""; `event:`/`id:` are kept; `retry:` is ignored.
Bytes are decoded as UTF-8 only per whole line, so a multi-byte character split across reads
is never mangled.

The decoder only frames events; `[DONE]`, error events and JSON are the client's business.
"""

from __future__ import annotations

from typing import NamedTuple


class SSEEvent(NamedTuple):
    # A tuple rather than a dataclass: one is made per streamed token, and tuples are cheap.
    data: str
    event: str = "message"
    id: str | None = None


class SSEDecoder:
    """Feed raw bytes as they arrive; get back the events completed by them."""

    __slots__ = ("_buffer", "_data", "_event", "_id", "_last_id", "_pending_cr")

    def __init__(self) -> None:
        self._buffer = b""
        self._pending_cr = False
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._last_id: str | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if not chunk:
            return []
        if self._pending_cr:
            # The previous read ended with CR; an LF starting this one belongs to it.
            self._pending_cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buffer = self._buffer + chunk if self._buffer else chunk
        events: list[SSEEvent] = []
        if b"\r" not in buffer:
            # Fast path: LF-only streams (what vLLM and most servers send).
            *lines, self._buffer = buffer.split(b"\n")
        else:
            lines, self._buffer = self._split_mixed(buffer)
        data = self._data
        for raw in lines:
            # Inline fast paths for the two lines every token brings: `data: ...` and blank.
            if raw[:6] == b"data: ":
                data.append(raw[6:].decode("utf-8", errors="replace"))
                continue
            if not raw and data and self._id is None:
                events.append(SSEEvent("\n".join(data), self._event or "message", self._last_id))
                data.clear()
                self._event = ""
                continue
            event = self._process_line(raw)
            if event is not None:
                events.append(event)
        return events

    def _split_mixed(self, buffer: bytes) -> tuple[list[bytes], bytes]:
        lines: list[bytes] = []
        start = 0
        size = len(buffer)
        i = 0
        while i < size:
            byte = buffer[i]
            if byte == 0x0A:  # LF
                lines.append(buffer[start:i])
                start = i + 1
            elif byte == 0x0D:  # CR, maybe the first half of CRLF
                lines.append(buffer[start:i])
                if i + 1 < size:
                    if buffer[i + 1] == 0x0A:
                        i += 1
                else:
                    self._pending_cr = True
                start = i + 1
            i += 1
        return lines, buffer[start:]

    def _process_line(self, raw: bytes) -> SSEEvent | None:
        if not raw:
            return self._dispatch()
        line = raw.decode("utf-8", errors="replace")
        if line[0] == ":":
            return None  # comment / keep-alive
        field, sep, value = line.partition(":")
        if sep and value[:1] == " ":
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\x00" not in value:
            self._id = value
        # "retry" and unknown fields are ignored, as the spec says.
        return None

    def _dispatch(self) -> SSEEvent | None:
        if self._id is not None:
            self._last_id = self._id
            self._id = None
        if not self._data:
            # No `data:` line: the data buffer is empty and nothing is dispatched (WHATWG).
            # A bare `data:` left "\n" in the buffer, so its event (data "") is dispatched.
            self._event = ""
            return None
        event = SSEEvent("\n".join(self._data), self._event or "message", self._last_id)
        self._data.clear()
        self._event = ""
        return event

    def has_partial(self) -> bool:
        """True when bytes or data lines are waiting for an end of event."""
        return bool(self._buffer) or bool(self._data)
