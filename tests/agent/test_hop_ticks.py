"""The gateway's hot path costs no more event-loop iterations than a bare pass-through.

Below saturation the gateway's added TTFT is its own CPU plus the loop iterations a request
spends in it (each one an epoll round and whatever else is ready). This counts the iterations,
not milliseconds: the gateway (the seed's tier config verbatim) and a bare aiohttp
pass-through run on uvicorn in this test's loop, in front of a raw upstream in the same loop,
and a ticker callback re-armed every iteration numbers them. Per request: iterations from the
client's write to the upstream's read of the request (in), and from the upstream's first
chunk to the client's read of it (out). A hop that waits for a pump, a timer or a task of its
own before sending upstream shows as more iterations than the bare pass-through's, on any
machine and at any load.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import uvicorn

from gpu_agent.__main__ import build_agent
from gpu_agent.app import create_app
from gpu_agent.config import parse_args
from gpu_agent.sim.testing import free_port
from scheduler import config_to_dict, default_config
from tests.agent.agent_helpers import ALL_KEY, KEYS, write_json

REQUESTS = 15
_CHUNK = b'data: {"id":"x","choices":[{"index":0,"delta":{"content":"tok"}}]}\n\n'
_DONE = b"data: [DONE]\n\n"


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class Ticks:
    """Numbers the loop's iterations: a callback that re-arms itself with call_soon runs
    exactly once per iteration."""

    def __init__(self) -> None:
        self.n = 0
        self._loop = asyncio.get_running_loop()
        self._stopped = False
        self._loop.call_soon(self._tick)

    def _tick(self) -> None:
        self.n += 1
        if not self._stopped:
            self._loop.call_soon(self._tick)

    def stop(self) -> None:
        self._stopped = True


class Upstream(asyncio.Protocol):
    """A completion: the headers and one content chunk at once, then [DONE]. Notes the
    iteration each request arrived in and each first chunk left in."""

    ticks: Ticks
    arrived: list[int]
    answered: list[int]

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self.buffer[:end].lower()
        at = head.find(b"content-length:")
        stop = head.find(b"\r\n", at)
        length = int(head[at + 15 : stop if stop > 0 else None]) if at >= 0 else 0
        if len(self.buffer) < end + 4 + length:
            return
        self.buffer = self.buffer[end + 4 + length :]
        if not head.split(b" ", 2)[1].endswith(b"/completions"):
            self.transport.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            return
        self.arrived.append(self.ticks.n)
        self.transport.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n" + _chunked(_CHUNK)
        )
        self.answered.append(self.ticks.n)
        self.transport.write(_chunked(_DONE) + b"0\r\n\r\n")


def _bare_proxy(upstream: str) -> Any:
    """The floor: uvicorn + one aiohttp session, nothing else (lab/bench_gateway.py's)."""
    state: dict[str, aiohttp.ClientSession] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                state["s"] = aiohttp.ClientSession(auto_decompress=False)
                await send({"type": "lifespan.startup.complete"})
            await state["s"].close()
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        async with state["s"].post(upstream + scope["path"], data=body) as r:
            headers = [(b"content-type", b"text/event-stream")]
            await send({"type": "http.response.start", "status": r.status, "headers": headers})
            async for chunk in r.content.iter_any():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[int]:
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                            access_log=False, lifespan="on")  # fmt: skip
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            assert not task.done(), "uvicorn did not start"
            await asyncio.sleep(0.01)
        yield port
    finally:
        server.should_exit = True
        await task


class Client(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport
        self.got = b""
        self.first: asyncio.Future[int] | None = None
        self.done: asyncio.Future[None] | None = None

    def data_received(self, data: bytes) -> None:
        self.got += data
        assert self.first is not None and self.done is not None
        if not self.first.done() and b'"content":"tok"' in self.got:
            self.first.set_result(self.ticks.n)
        if self.got.endswith(b"0\r\n\r\n") and not self.done.done():
            self.done.set_result(None)

    ticks: Ticks


async def _hops(port: int, ticks: Ticks, upstream: type[Upstream]) -> tuple[float, float]:
    """Median iterations in and out over REQUESTS sequential streamed requests."""
    loop = asyncio.get_running_loop()
    transport, client = await loop.create_connection(Client, "127.0.0.1", port)
    client.ticks = ticks
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                       "stream": True, "max_tokens": 4}).encode()  # fmt: skip
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
        f"authorization: Bearer {ALL_KEY}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    ins, outs = [], []
    try:
        for i in range(REQUESTS + 3):  # the first three warm the pools up
            client.got = b""
            client.first, client.done = loop.create_future(), loop.create_future()
            start = len(upstream.arrived)
            sent = ticks.n
            transport.write(head + body)
            first = await asyncio.wait_for(client.first, 10)
            await asyncio.wait_for(client.done, 10)
            assert b" 200 " in client.got.split(b"\r\n", 1)[0], client.got[:300]
            if i >= 3:
                ins.append(upstream.arrived[start] - sent)
                outs.append(first - upstream.answered[start])
            await asyncio.sleep(0.01)
    finally:
        transport.close()
    return statistics.median(ins), statistics.median(outs)


async def test_the_gateway_hop_takes_no_more_loop_iterations_than_a_bare_pass_through(
    tmp_path: Path,
) -> None:
    loop = asyncio.get_running_loop()
    ticks = Ticks()
    upstream = type("Up", (Upstream,), {"ticks": ticks, "arrived": [], "answered": []})
    up_port = free_port()
    server = await loop.create_server(upstream, "127.0.0.1", up_port)
    engine = f"http://127.0.0.1:{up_port}"
    Client.ticks = ticks
    try:
        seed = write_json(tmp_path / "tiers.json", config_to_dict(default_config()))
        options = parse_args([
            "--engine-url", engine, "--listen", f"127.0.0.1:{free_port()}",
            "--tier-config", str(seed),
            "--keys", str(write_json(tmp_path / "keys.json", KEYS)),
            "--state-dir", str(tmp_path / "state"), "--log-level", "warning",
        ])  # fmt: skip
        async with serving(create_app(build_agent(options))) as port:
            gateway = await _hops(port, ticks, upstream)
        async with serving(_bare_proxy(engine)) as port:
            bare = await _hops(port, ticks, upstream)
    finally:
        ticks.stop()
        server.close()
        await server.wait_closed()
    print(f"loop iterations in/out: gateway {gateway}, bare pass-through {bare}")
    # The gateway's key check, body parse, scheduler release and first-token scan all run in
    # the iterations the pass-through needs anyway.
    assert gateway[0] <= bare[0], (gateway, bare)
    assert gateway[1] <= bare[1], (gateway, bare)
