"""The gateway's edge towards its clients: the bounds a server facing untrusted clients needs and
uvicorn does not give (docs/gateway.md, "Bounds").

uvicorn's httptools protocol reads a request's head with no deadline and no size limit, and its
body with no deadline; its keep-alive timer stops at the first byte of the next request. So
`EdgeProtocol` (its subclass, the one `python -m gpu_agent` serves with) adds, per connection:

- a head deadline (`HEADER_TIMEOUT_S` from the connection or the request's first byte to its
  last header) and a head size limit (`MAX_HEADER_BYTES`); past them a 408 or 431, then close;
- a body deadline (`--client-body-timeout` from the head to the body's last byte): a 408 if
  nothing was answered yet, then close;
- after a refusal sent before the body was read (401, 413, ...), the rest of the body is read
  and dropped, as much as `--max-body-bytes`, then the connection closes: what was buffered
  is let go at once, and a client that sent its request whole keeps its connection;
- at most `MAX_UNAUTHENTICATED` connections that no key has been accepted on (counted from the
  connection on; the gateway says when a key is accepted, through the scope's
  ``extensions["tiergate.edge"]``): a new one past it closes the oldest such connection, so a
  client that opens connections and stalls cannot hold the sockets keyed clients need.

The bytes of request bodies being received are bounded in all by `BodyBudget`, which the
gateway takes from before it reads a body (429 past it), and per request by --max-body-bytes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gpu_agent.config import AgentOptions
from gpu_agent.errors import error_body
from gpu_agent.types import Receive, Scope

# A request head is a few hundred bytes from the OpenAI SDKs, a few KiB behind proxies that add
# their own; a client sends it in one write. So 10 s and 32 KiB (nginx's default header
# buffers) refuse no real client, and bound what a stalled or endless head holds.
HEADER_TIMEOUT_S = 10.0
MAX_HEADER_BYTES = 32 << 10
# Sockets for connections no key has vouched for; each holds at most MAX_HEADER_BYTES of head.
MAX_UNAUTHENTICATED = 512
EXTENSION = "tiergate.edge"


@dataclass(frozen=True, slots=True)
class EdgeLimits:
    body_timeout_s: float
    discard_bytes: int  # read and dropped after an early refusal before the connection closes
    header_timeout_s: float = HEADER_TIMEOUT_S
    max_header_bytes: int = MAX_HEADER_BYTES
    max_unauthenticated: int = MAX_UNAUTHENTICATED

    @classmethod
    def of(cls, options: AgentOptions) -> EdgeLimits:
        return cls(options.client_body_timeout_s, options.max_body_bytes)


class EdgeGuard:
    """What a server's connections share: the limits, and the connections no key has been
    accepted on yet, oldest first."""

    def __init__(self, limits: EdgeLimits) -> None:
        self.limits = limits
        self.unauthenticated: dict[EdgeProtocol, None] = {}
        self.closed: dict[str, int] = {}  # why the edge closed connections: count (for tests)

    def admit(self, conn: EdgeProtocol) -> None:
        self.unauthenticated[conn] = None
        while len(self.unauthenticated) > self.limits.max_unauthenticated:
            oldest = next(iter(self.unauthenticated))
            del self.unauthenticated[oldest]
            oldest.cut("evicted", 0)

    def count(self, reason: str) -> None:
        self.closed[reason] = self.closed.get(reason, 0) + 1


class EdgeProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the edge's bounds; built per server by `protocol`."""

    guard: ClassVar[EdgeGuard]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.trusted = False
        self._deadline: asyncio.TimerHandle | None = None
        self._in_head = False  # a request has begun and its head is not complete
        self._requests = self._completed = 0  # requests begun, and ended, on this connection
        self._head_bytes = 0
        self._dropped = 0  # body bytes dropped after an early answer
        # The scope's extensions: how the gateway finds the connection to trust (one dict for
        # all the connection's requests).
        self._extensions: dict[str, dict[object, object]] = {EXTENSION: {"connection": self}}

    # -- uvicorn's protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.guard.limits.header_timeout_s, "header_timeout")
        self.guard.admit(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.guard.unauthenticated.pop(self, None)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        requests, completed = self._requests, self._completed
        super().data_received(data)
        # A read that leaves a head unfinished is all head bytes, unless it also ended the
        # request before (a pipelined one's body): that read is not counted.
        if self._in_head and (self._requests == requests or self._completed == completed):
            self._head_bytes += len(data)
            if self._head_bytes > self.guard.limits.max_header_bytes:
                self.cut("header_too_large", 431, "the request head is too large")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope["extensions"] = self._extensions
        self._requests += 1
        self._in_head = True
        self._head_bytes = 0
        self._dropped = 0
        if self._deadline is None:  # a kept-alive connection's next request: from its first byte
            self._arm(self.guard.limits.header_timeout_s, "header_timeout")

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()
        if not self.pipeline:  # a pipelined request's body waits for the one before it
            self._arm(self.guard.limits.body_timeout_s, "body_timeout")

    def on_body(self, body: bytes) -> None:
        if self.cycle.response_complete:  # answered before its body was read: drop the rest
            self._dropped += len(body)
            if self._dropped > self.guard.limits.discard_bytes and not self.transport.is_closing():
                self.guard.count("discard_limit")
                self.transport.close()
            return
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._completed += 1
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        cycle = self.cycle
        if cycle is not None and cycle.response_complete and cycle.more_body:
            cycle.body = bytearray()  # answered without its body: nobody will read these
        super().on_response_complete()

    # -- the edge -----------------------------------------------------------------------------

    def trust(self) -> None:
        """A key was accepted on this connection: it no longer counts as unauthenticated."""
        if not self.trusted:
            self.trusted = True
            self.guard.unauthenticated.pop(self, None)

    def cut(self, reason: str, status: int, message: str = "") -> None:
        """Close the connection, first answering `status` (when not 0) if no response has
        started; the request's handler, if any, sees the client gone."""
        self._disarm()
        self.guard.count(reason)
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        cycle = self.cycle  # in a head, the one before it (or none)
        started = not self._in_head and cycle is not None and cycle.response_started
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # its send() now writes nothing, its receive() ends
            cycle.message_event.set()
        if status and not started:
            body = error_body(status, message, reason)
            head = b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n" % (
                status,
                _REASONS.get(status, b"Error"),
            )
            head += b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body)
            transport.write(head + body)
        transport.close()

    def _arm(self, seconds: float, reason: str) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(seconds, self._expired, reason, seconds)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self, reason: str, seconds: float) -> None:
        self._deadline = None
        what = "head" if reason == "header_timeout" else "body"
        begun = self._in_head or reason == "body_timeout"
        self.cut(reason, 408 if begun else 0, f"the request {what} did not arrive in {seconds:g} s")


_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}


def protocol(limits: EdgeLimits) -> type[EdgeProtocol]:
    """The protocol class for one server (uvicorn's ``http=``), its connections sharing one
    guard."""
    return type("EdgeProtocol", (EdgeProtocol,), {"guard": EdgeGuard(limits)})


def trust(scope: Scope) -> None:
    """The gateway accepted this request's key: its connection leaves the unauthenticated
    count (a no-op under a server without the edge, as in-process tests run it)."""
    extensions = scope.get("extensions")
    if extensions:
        edge = extensions.get(EXTENSION)
        conn = edge.get("connection") if edge is not None else None
        if isinstance(conn, EdgeProtocol):
            conn.trust()


class BodyRefused(Exception):
    """A body not read: the status, message and code to answer with."""

    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


class ClientGone(Exception):
    """The client disconnected, or the edge cut it off, before its request body was complete."""


class BodyBudget:
    """The bytes of request bodies being received, over all requests: a body takes its
    Content-Length before its first byte is read (a chunked one, each piece as it comes) and
    gives it back once it is complete or refused. The memory a body holds after that is its
    request's, bounded by the tiers' queues."""

    __slots__ = ("held", "total")

    def __init__(self, total: int) -> None:
        self.total = total
        self.held = 0

    def take(self, size: int) -> bool:
        if self.held + size > self.total:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        self.held -= size


async def read_body(receive: Receive, limit: int, budget: BodyBudget, declared: int) -> bytes:
    """The whole body, of at most `limit` bytes, `declared` of them taken from `budget` first.
    Raises BodyRefused (413 past `limit`, 429 past the budget) or ClientGone."""
    held = declared
    if not budget.take(held):
        raise _budget_full(budget)
    try:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientGone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise BodyRefused(
                    413, f"request body is larger than {limit} bytes", "request_too_large"
                )
            if size > held:  # a chunked body, or one longer than it said
                if not budget.take(size - held):
                    raise _budget_full(budget)
                held = size
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        budget.give(held)


def _budget_full(budget: BodyBudget) -> BodyRefused:
    message = (
        f"the gateway is receiving {budget.total} bytes of request bodies already "
        "(--body-budget-bytes); retry"
    )
    return BodyRefused(429, message, "body_budget_full")
