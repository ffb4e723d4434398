"""Relaying an engine's stream to the client (docs/architecture.md#the-request-path).

The engine's pace and the client's are decoupled, so that the engine slot is handed back when
the engine finishes, however slowly the client reads. The gateway's handler reads the engine
and `write`s each chunk to a `ClientWriter`. While the client keeps up (the transport holds
nothing unsent, so uvicorn's send cannot wait on flow control) the chunk is sent at once, as a
plain relay would. From the first chunk that finds the transport behind, every chunk goes
through the writer's own task, in order, and waits in its buffer while the client is slow.
That buffer is bounded, per stream and over all streams (`BufferBudget`): past the bound the
handler stops reading the engine until the client catches up, so memory stays bounded and the
engine is back-pressured as TCP would do.

A stalled client: uvicorn's `send()` awaits the transport's flow control (it drains before it
writes) while the socket's buffers are full, i.e. while the client does not read. A send that
has not returned after `write_timeout_s` ends the client (`ClientStalled`): the writer's task
is cancelled and the connection aborted. A watchdog timer, started with the task and re-armed
once per timeout, checks that; a client that keeps up costs neither task nor timer.

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


def _transport_of(send: Send) -> Any:
    # uvicorn's `send` is a bound method of its request cycle, which holds the transport.
    # Elsewhere there is none: every chunk takes the writer's task, and a stalled client's
    # cancelled send and unfinished response make the server close the connection.
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    return transport if callable(getattr(transport, "get_write_buffer_size", None)) else None


class ClientWriter:
    """Sends one stream's chunks to the client; see the module docstring."""

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
        "_transport",
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
        self._transport = _transport_of(send)
        self._loop = asyncio.get_running_loop()
        self._chunks: list[bytes] = []
        self._size = 0
        self._wake: asyncio.Future[None] | None = None
        self._room: asyncio.Future[None] | None = None
        self._ending = False
        self._tail = b""
        self._sending_since: float | None = None
        self.stalled = False
        self.task: asyncio.Task[None] | None = None
        self._watchdog: asyncio.TimerHandle | None = None

    # -- the handler's side ---------------------------------------------------------------

    def _caught_up(self) -> bool:
        """Nothing queued and nothing unsent in the transport: uvicorn's send cannot wait on
        flow control (it pauses above the high-water mark, resumes at the low one)."""
        transport = self._transport
        return (
            self.task is None
            and transport is not None
            and transport.get_write_buffer_size() == 0
            and not transport.is_closing()
        )

    async def write(self, chunk: bytes) -> None:
        """Send or queue a chunk; waits only while the buffer is past its bounds. Raises
        `ClientStalled` once the writer has given up on the client."""
        if self._caught_up():
            await self._send({"type": "http.response.body", "body": chunk, "more_body": True})
            return
        task = self.task or self._start()
        if task.done():
            self._raise_failure()
        self._chunks.append(chunk)
        self._size += len(chunk)
        self._budget.used += len(chunk)
        self._wake_writer()
        if self.full:
            await self._room_again(task)

    @property
    def full(self) -> bool:
        return self._size > self._stream_limit or (
            self._size > 0 and self._budget.used > self._budget.limit
        )

    async def _room_again(self, task: asyncio.Task[None]) -> None:
        # The client is behind: stop reading the engine until the buffer is under its bounds.
        while self.full and not task.done():
            self._room = self._loop.create_future()
            await self._room
        if task.done():
            self._raise_failure()

    async def finish(self, tail: bytes = b"") -> None:
        """Send what is queued and `tail`, end the response, and wait for the client to have
        it all (raises `ClientStalled` if it stops reading)."""
        if self._caught_up():
            self._before_end()
            await self._send({"type": "http.response.body", "body": tail, "more_body": False})
            return
        self._ending = True
        self._tail = tail
        task = self.task or self._start()
        self._wake_writer()
        await asyncio.shield(task)

    async def close(self) -> None:
        """Stop sending (the request is over some other way) and wait for the task to end."""
        task = self.task
        if task is None:
            return
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, ClientStalled):
            await task

    def _start(self) -> asyncio.Task[None]:
        self.task = task = self._loop.create_task(self._run())
        self._watchdog = self._loop.call_later(self._timeout, self._check)
        return task

    def _wake_writer(self) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    def _raise_failure(self) -> None:
        task = self.task
        assert task is not None
        if task.cancelled():
            raise ClientStalled("the client response ended")
        exc = task.exception()
        raise exc if exc is not None else ClientStalled("the client response ended")

    # -- the writer's task ----------------------------------------------------------------

    async def _run(self) -> None:
        send, loop = self._send, self._loop
        try:
            while not self._ending:
                chunks = self._chunks
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
            if self._watchdog is not None:
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
            # Abort, not close: a close would wait to flush to a client that does not read.
            if self._transport is not None:
                self._transport.abort()
            if self.task is not None:
                self.task.cancel()
            return
        at = since + self._timeout if since is not None else now + self._timeout
        self._watchdog = self._loop.call_at(at, self._check)
