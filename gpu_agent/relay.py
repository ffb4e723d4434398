"""Relaying an engine's stream to the client (DESIGN.md 3).

The engine's pace and the client's are decoupled, so that the engine slot is handed back when
the engine finishes, however slowly the client reads. The gateway's handler reads the engine
and `push`es each chunk to a `ClientWriter`, whose own task sends the chunks on; while the
client is slow they wait in the writer's buffer. That buffer is bounded, per stream and over
all streams (`BufferBudget`): past the bound the handler stops reading the engine until the
client catches up (`room`), so memory stays bounded and the engine is back-pressured as TCP
would do.

A stalled client: uvicorn's `send()` awaits the transport's flow control (it drains before it
writes) while the socket's buffers are full, i.e. while the client does not read. A send that
has not returned after `write_timeout_s` ends the client (`ClientStalled`): the writer's task
is cancelled and the connection aborted (a close would wait to flush to a client that does not
read). A watchdog timer per stream checks that, re-armed once per timeout, so the hot path pays
two clock reads per send and no timer.

`FirstDelta` is the scheduler's first-token signal: the first non-empty delta of any kind
(content, text, reasoning, tool calls), found in the raw SSE bytes with one regex, robust to an
event split across two reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable
from typing import Any

from gpu_agent.types import Send

# A key whose value is a non-empty string, or a tool call list with an element. The byte after
# the opening quote is required, so that a read ending just there is not taken for a token
# (the next byte may close an empty string).
_FIRST_DELTA = re.compile(
    rb'"(?:content|text|reasoning_content|reasoning)":\s*"[^"]|"tool_calls":\s*\[\s*\{'
)
_CARRY = 64  # kept from the previous read: longer than any match


class FirstDelta:
    """Feed the stream's reads in order; `seen` is True from the read with the first token."""

    __slots__ = ("_carry",)

    def __init__(self) -> None:
        self._carry = b""

    def seen(self, chunk: bytes) -> bool:
        data = self._carry + chunk if self._carry else chunk
        if _FIRST_DELTA.search(data) is not None:
            return True
        self._carry = data[-_CARRY:]
        return False


class ClientStalled(Exception):
    """The client read nothing for the write timeout; its connection was aborted."""


class BufferBudget:
    """Bytes buffered for slow clients, over all streams of the gateway."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0


def _abort_connection(send: Send) -> None:
    # uvicorn's `send` is a bound method of its request cycle, which holds the transport.
    # Elsewhere the cancelled send and the unfinished response make the server close it.
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    abort = getattr(transport, "abort", None)
    if callable(abort):
        abort()


class ClientWriter:
    """Sends one stream's chunks to the client from its own task; see the module docstring."""

    __slots__ = (
        "_before_end",
        "_budget",
        "_chunks",
        "_ending",
        "_loop",
        "_room",
        "_send",
        "_sending_since",
        "_size",
        "_stream_limit",
        "_tail",
        "_timeout",
        "_wake",
        "_watchdog",
        "stalled",
        "task",
    )

    def __init__(
        self,
        send: Send,
        budget: BufferBudget,
        stream_limit: int,
        write_timeout_s: float,
        before_end: Callable[[], None],
    ) -> None:
        """`before_end` is called just before the response's last send: from then on the
        server reports the request as over (uvicorn's receive() says "disconnect")."""
        self._send = send
        self._before_end = before_end
        self._budget = budget
        self._stream_limit = stream_limit
        self._timeout = write_timeout_s
        self._loop = asyncio.get_running_loop()
        self._chunks: list[bytes] = []
        self._size = 0
        self._wake: asyncio.Future[None] | None = None
        self._room: asyncio.Future[None] | None = None
        self._ending = False
        self._tail = b""
        self._sending_since: float | None = None
        self.stalled = False
        self.task = self._loop.create_task(self._run())
        self._watchdog = self._loop.call_later(write_timeout_s, self._check)

    # -- the handler's side ---------------------------------------------------------------

    def push(self, chunk: bytes) -> None:
        """Queue a chunk; raises the writer's failure once it has ended (a stalled client)."""
        if self.task.done():
            self._raise_failure()
        self._chunks.append(chunk)
        self._size += len(chunk)
        self._budget.used += len(chunk)
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    @property
    def full(self) -> bool:
        return self._size > self._stream_limit or (
            self._size > 0 and self._budget.used > self._budget.limit
        )

    async def room(self) -> None:
        """Wait until the buffer is under its bounds again."""
        while self.full and not self.task.done():
            self._room = self._loop.create_future()
            await self._room
        if self.task.done():
            self._raise_failure()

    async def finish(self, tail: bytes = b"") -> None:
        """Send what is buffered and `tail`, end the response, and wait for the client to
        have it all (raises `ClientStalled` if it stops reading)."""
        self._ending = True
        self._tail = tail
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)
        await asyncio.shield(self.task)

    async def close(self) -> None:
        """Stop sending (the request is over some other way) and wait for the task to end."""
        if not self.task.done():
            self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, ClientStalled):
            await self.task

    def _raise_failure(self) -> None:
        if self.task.cancelled():
            raise ClientStalled("the client stopped reading")
        exc = self.task.exception()
        raise exc if exc is not None else ClientStalled("the client response ended")

    # -- the writer's task ----------------------------------------------------------------

    async def _run(self) -> None:
        send, loop = self._send, self._loop
        try:
            while True:
                chunks = self._chunks
                if self._ending:
                    break
                if not chunks:
                    self._wake = loop.create_future()
                    await self._wake
                    self._wake = None
                    continue
                data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
                self._chunks = []
                self._sending_since = loop.time()
                await send({"type": "http.response.body", "body": data, "more_body": True})
                self._sending_since = None
                self._sent(len(data))
            data = b"".join([*self._chunks, self._tail])
            self._chunks = []
            self._before_end()
            self._sending_since = loop.time()
            await send({"type": "http.response.body", "body": data, "more_body": False})
            self._sending_since = None
        except asyncio.CancelledError:
            if self.stalled:
                raise ClientStalled(
                    f"the client read nothing for {self._timeout:g} s; connection aborted"
                ) from None
            raise
        finally:
            self._watchdog.cancel()
            self._budget.used -= self._size
            self._size = 0
            self._wake_reader()

    def _sent(self, size: int) -> None:
        self._size -= size
        self._budget.used -= size
        if not self.full:
            self._wake_reader()

    def _wake_reader(self) -> None:
        room = self._room
        if room is not None and not room.done():
            room.set_result(None)

    def _check(self) -> None:
        since, now = self._sending_since, self._loop.time()
        if since is not None and now - since >= self._timeout:
            self.stalled = True
            _abort_connection(self._send)
            self.task.cancel()
            return
        at = since + self._timeout if since is not None else now + self._timeout
        self._watchdog = self._loop.call_at(at, self._check)


def relay_headers(headers: Any, keep: tuple[bytes, ...]) -> list[tuple[bytes, bytes]]:
    """The engine's response headers the client gets (content type, request id)."""
    return [
        (name.lower().encode(), value.encode())
        for name, value in headers.items()
        if name.lower().encode() in keep
    ]
