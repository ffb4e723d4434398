"""The cheap upstream and the bare pass-through proxies lab/bench_gateway.py measures the
gateway against (and lab/bench_admission.py, lab/bench_hop.py and the admission tests start,
as `lab/bench_gateway.py upstream|proxy`).

- the upstream: a raw asyncio HTTP/1.1 server (keep-alive, chunked SSE), not the simulator, so
  that its own cost does not blur the gateway's. Every completion is CHUNKS content chunks
  CHUNK_GAP_S apart, then [DONE]; optionally after a fixed time to the first token, and with a
  fixed number of streams at once (an engine of fixed capacity with an FCFS queue);
- the proxies: the same uvicorn ASGI stack as the gateway with nothing else (no keys, no
  scheduler, no telemetry), one with an aiohttp upstream client and one with httpx: the floor
  a relay in Python can reach.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

CHUNKS = 16
CHUNK_GAP_S = 0.001

# -- upstream: raw asyncio HTTP/1.1, keep-alive, chunked SSE ---------------------------------

# The delta each content chunk carries (--delta): vLLM's shapes for text, thinking and tools.
DELTAS = {
    "content": b'{"content":"tok "}',
    "reasoning": b'{"reasoning_content":"tok "}',
    "tool_calls": b'{"content":null,"tool_calls":[{"index":0,"function":{"arguments":"tok "}}]}',
}


def frame(delta: str) -> bytes:
    event = (
        b'data: {"id":"b","object":"chat.completion.chunk","model":"bench","choices":'
        b'[{"index":0,"delta":%s,"finish_reason":null}]}\n\n' % DELTAS[delta]
    )
    return b"%x\r\n%s\r\n" % (len(event), event)


_FRAME = frame("content")
DONE = b"data: [DONE]\n\n"
_END = b"%x\r\n%s\r\n0\r\n\r\n" % (len(DONE), DONE)
FIRST_TOKEN = re.compile(rb'"content": ?"[^"]')
_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def _content_length(head: bytes) -> int:
    at = head.find(b"content-length:")
    if at < 0:
        return 0
    stop = head.find(b"\r\n", at)
    return int(head[at + 15 : stop if stop > 0 else None])


class _Upstream(asyncio.Protocol):
    """Every completion: `ttft_s` of silence, then CHUNKS frames CHUNK_GAP_S apart. With
    `slots`, only that many streams run at once and the rest wait in arrival order: an engine
    of fixed capacity (slots / (ttft + 15 ms) req/s) with an FCFS waiting queue."""

    ttft_s = 0.0
    slots: asyncio.Semaphore | None = None
    frame = _FRAME

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport  # uvloop's transport is not an asyncio.Transport
        self.buffer = b""
        self.streams: set[asyncio.Task[None]] = set()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].lower()
            length = _content_length(head)
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length :]
            path = head.split(b" ", 2)[1]
            if path.endswith(b"/completions"):
                task = asyncio.ensure_future(self._stream())
                self.streams.add(task)
                task.add_done_callback(self.streams.discard)
            elif path == b"/health":
                self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            else:
                self.transport.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")

    async def _stream(self) -> None:
        if self.slots is None:
            await self._frames()
            return
        async with self.slots:
            await self._frames()

    async def _frames(self) -> None:
        write, frame = self.transport.write, self.frame
        write(_HEAD)
        if self.ttft_s:
            await asyncio.sleep(self.ttft_s)
        write(frame)
        for _ in range(CHUNKS - 1):
            await asyncio.sleep(CHUNK_GAP_S)
            if self.transport.is_closing():
                return
            write(frame)
        write(_END)


async def serve_upstream(
    port: int, ttft_ms: float = 0.0, slots: int = 0, delta: str = "content"
) -> None:
    _Upstream.frame = frame(delta)
    _Upstream.ttft_s = ttft_ms / 1000.0
    _Upstream.slots = asyncio.Semaphore(slots) if slots else None
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Upstream, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


# -- bare pass-through proxies (the floor the gateway is compared with) ----------------------


def proxy_app(client: str, upstream: str) -> Any:
    state: dict[str, Any] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    if client == "aiohttp":
                        import aiohttp

                        state["s"] = aiohttp.ClientSession(
                            connector=aiohttp.TCPConnector(limit=1024), auto_decompress=False
                        )
                    else:
                        import httpx

                        state["s"] = httpx.AsyncClient(
                            limits=httpx.Limits(max_connections=1024), timeout=60
                        )
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        headers = [(b"content-type", b"text/event-stream")]
        if client == "aiohttp":
            async with state["s"].post(upstream + scope["path"], data=body) as r:
                await send({"type": "http.response.start", "status": r.status, "headers": headers})
                async for chunk in r.content.iter_any():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
        else:
            request = state["s"].build_request("POST", upstream + scope["path"], content=body)
            r = await state["s"].send(request, stream=True)
            try:
                await send(
                    {"type": "http.response.start", "status": r.status_code, "headers": headers}
                )
                async for chunk in r.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            finally:
                await r.aclose()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app
