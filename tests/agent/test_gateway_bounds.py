"""Every wait at the gateway's edge is bounded, and what the headers can refuse is refused
before a byte of the body is read (docs/gateway.md, "Bounds").

The agent runs in this test's loop on uvicorn with the edge's protocol (as `python -m
gpu_agent` serves it, with short bounds), in front of a scripted engine in the same loop; a
client speaks raw HTTP/1.1 over a socket, so a test can send a head without its body, stall
mid-body, or never finish a head.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from gpu_agent.__main__ import build_agent
from gpu_agent.agent import Agent
from gpu_agent.app import create_app
from gpu_agent.config import parse_args
from gpu_agent.edge import EdgeGuard, EdgeLimits, protocol
from gpu_agent.sim.testing import free_port
from gpu_agent.upstream import PoolBusy, UpstreamError, UpstreamPool
from tests.agent.agent_helpers import ALL_KEY, KEYS, MODEL, tier_config, write_json

BODY = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}).encode()
ANSWER = b'{"id":"c1","choices":[{"index":0,"message":{"content":"hello"}}]}'
BEARER = f"Authorization: Bearer {ALL_KEY}\r\n".encode()


class Engine:
    """An engine that answers every completion at once (`hold` set: answers none, keeping
    the connection), and 404 to anything else (the agent's sampler)."""

    def __init__(self) -> None:
        self.hold = False
        self.completions = 0
        self.port = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._answer(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
            if not head.split(b" ", 2)[1].endswith(b"/completions"):
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                continue
            self.completions += 1
            if self.hold:
                await reader.read()  # until the gateway closes the connection
                return
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER)
            )


@dataclasses.dataclass
class Served:
    port: int
    agent: Agent
    guard: EdgeGuard
    engine: Engine
    clients: list[Client] = dataclasses.field(default_factory=list)

    async def connect(self) -> Client:
        client = Client(*await asyncio.open_connection("127.0.0.1", self.port))
        self.clients.append(client)
        return client


@contextlib.asynccontextmanager
async def served(tmp_path: Path, limits: EdgeLimits, **options: Any) -> AsyncIterator[Served]:
    engine = Engine()
    server = await asyncio.start_server(engine.serve, "127.0.0.1", 0)
    engine.port = server.sockets[0].getsockname()[1]
    port = free_port()
    argv = [
        "--engine-url", f"http://127.0.0.1:{engine.port}", "--listen", f"127.0.0.1:{port}",
        "--tier-config", str(write_json(tmp_path / "tiers.json", tier_config())),
        "--keys", str(write_json(tmp_path / "keys.json", KEYS)),
        "--state-dir", str(tmp_path / "state"), "--log-level", "warning",
    ]  # fmt: skip
    agent = build_agent(dataclasses.replace(parse_args(argv), **options))
    edge = protocol(limits)
    config = uvicorn.Config(
        create_app(agent),  # type: ignore[arg-type]
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        http=edge,
    )
    uv = uvicorn.Server(config)
    task = asyncio.create_task(uv.serve())
    try:
        while not uv.started:
            assert not task.done(), "uvicorn did not start"
            await asyncio.sleep(0.01)
        gateway = Served(port, agent, edge.guard, engine)
        try:
            yield gateway
        finally:
            for client in gateway.clients:
                client.close()
    finally:
        uv.should_exit = True
        await task
        server.close()


def limits(**kw: Any) -> EdgeLimits:
    return EdgeLimits(**{"body_timeout_s": 5.0, "discard_bytes": 1 << 20, **kw})


def head(length: int | None, auth: bytes = BEARER, path: bytes = b"/v1/chat/completions") -> bytes:
    size = b"content-length: %d\r\n" % length if length is not None else b""
    return b"POST %s HTTP/1.1\r\nhost: x\r\n%s%s\r\n" % (path, auth, size)


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def response(self, timeout: float = 5.0) -> tuple[int, dict[str, str], bytes]:
        """The next response's status, headers and body."""
        async with asyncio.timeout(timeout):
            raw = await self.reader.readuntil(b"\r\n\r\n")
            lines = raw.decode("latin-1").split("\r\n")
            headers = dict(line.lower().split(": ", 1) for line in lines[1:] if line)
            body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        return int(lines[0].split()[1]), headers, body

    async def closed_within(self, timeout: float) -> bool:
        """Whether the server closes the connection within `timeout` (what it sends first
        is read and dropped)."""
        try:
            async with asyncio.timeout(timeout):
                while await self.reader.read(65536):
                    pass
        except TimeoutError:
            return False
        except ConnectionError:
            pass
        return True

    def close(self) -> None:
        self.writer.close()


def code(body: bytes) -> str:
    return str(json.loads(body)["error"]["code"])


async def test_a_missing_or_bad_key_is_401_before_any_body_byte(tmp_path: Path) -> None:
    async with served(tmp_path, limits(body_timeout_s=0.5)) as gw:
        for auth in (b"", b"Authorization: Bearer tgk_wrong\r\n"):
            client = await gw.connect()
            await client.send(head(1 << 20, auth))  # a body announced, none sent
            status, _, body = await client.response(timeout=2)
            assert (status, code(body)) == (401, "invalid_api_key")
            # The rest of the body never comes: the body deadline closes the connection.
            assert await client.closed_within(2)
        assert gw.guard.closed.get("body_timeout") == 2
        # A refused request sent whole keeps its connection: the next one on it is served.
        client = await gw.connect()
        await client.send(head(len(BODY), b"") + BODY)
        assert (await client.response())[0] == 401
        await client.send(head(len(BODY)) + BODY)
        status, headers, body = await client.response()
        assert (status, headers["x-tiergate-tier"], body) == (200, "online", ANSWER)


async def test_a_content_length_over_the_limit_is_413_unread(tmp_path: Path) -> None:
    async with served(tmp_path, limits(discard_bytes=4096), max_body_bytes=1000) as gw:
        client = await gw.connect()
        await client.send(head(1 << 20))
        status, _, body = await client.response(timeout=2)
        assert (status, code(body)) == (413, "request_too_large")
        # What comes of the refused body is dropped, as much as the limit, then the
        # connection closes.
        await client.send(b"x" * 2048)
        assert not await client.closed_within(0.2)
        with contextlib.suppress(ConnectionError):
            await client.send(b"x" * 4096)
        assert await client.closed_within(1)
        assert gw.guard.closed == {"discard_limit": 1}
        # One that says less and sends more is cut at the limit as it is read.
        client = await gw.connect()
        await client.send(b"POST /v1/completions HTTP/1.1\r\nhost: x\r\n" + BEARER)
        await client.send(b"transfer-encoding: chunked\r\n\r\n%x\r\n%s\r\n" % (1001, b"x" * 1001))
        status, _, body = await client.response(timeout=2)
        assert (status, code(body)) == (413, "request_too_large")


async def test_a_stalled_body_is_408_after_the_body_timeout(tmp_path: Path) -> None:
    async with served(tmp_path, limits(body_timeout_s=0.5)) as gw:
        client = await gw.connect()
        started = time.monotonic()
        await client.send(head(len(BODY)) + BODY[:10])
        status, headers, body = await client.response(timeout=3)
        waited = time.monotonic() - started
        assert (status, code(body), headers["connection"]) == (408, "body_timeout", "close")
        assert 0.4 < waited < 2, waited
        assert await client.closed_within(1)
        assert gw.engine.completions == 0


async def test_a_stalled_or_endless_head_is_cut_off(tmp_path: Path) -> None:
    async with served(tmp_path, limits(header_timeout_s=0.5, max_header_bytes=4096)) as gw:
        silent = await gw.connect()  # connects and sends nothing
        partial = await gw.connect()
        await partial.send(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
        status, _, body = await partial.response(timeout=3)
        assert (status, code(body)) == (408, "header_timeout")
        assert await silent.closed_within(1)
        endless = await gw.connect()
        await endless.send(b"POST /v1/chat/completions HTTP/1.1\r\n")
        for i in range(20):
            await endless.send(b"x-filler-%d: %s\r\n" % (i, b"y" * 500))
        status, _, body = await endless.response(timeout=3)
        assert (status, code(body)) == (431, "header_too_large")
        assert await endless.closed_within(1)
        # A kept-alive connection's next head has the same bound, from its first byte.
        kept = await gw.connect()
        await kept.send(head(len(BODY)) + BODY)
        assert (await kept.response())[0] == 200
        await asyncio.sleep(0.6)  # idle longer than the head's bound: not a head yet
        await kept.send(b"POST /v1/chat/completions HTTP/1.1\r\n")
        status, _, body = await kept.response(timeout=3)
        assert (status, code(body)) == (408, "header_timeout")


def test_the_body_timeout_and_budget_are_agent_options() -> None:
    argv = ["--engine-url", "http://127.0.0.1:1", "--listen", "127.0.0.1:9", "--tier-config"]
    argv += ["t.json", "--keys", "k.json", "--client-body-timeout", "3"]
    options = parse_args([*argv, "--body-budget-bytes", "4096"])
    assert EdgeLimits.of(options) == EdgeLimits(3.0, options.max_body_bytes)
    assert options.body_budget_bytes == 4096
    defaults = EdgeLimits.of(parse_args(argv[:-2]))
    assert (defaults.body_timeout_s, defaults.header_timeout_s) == (20.0, 10.0)
    assert parse_args(argv[:-2]).body_budget_bytes == 64 << 20


async def test_bodies_past_the_budget_are_429_with_retry_after(tmp_path: Path) -> None:
    async with served(tmp_path, limits(body_timeout_s=1), body_budget_bytes=1000) as gw:
        slow = await gw.connect()
        await slow.send(head(950) + b"{")  # takes 950 of the 1000 and stalls
        await asyncio.sleep(0.1)
        client = await gw.connect()
        await client.send(head(len(BODY)) + BODY)
        status, headers, body = await client.response()
        assert (status, code(body), headers["retry-after"]) == (429, "body_budget_full", "1")
        # The stalled body's share comes back at its deadline; then the same request is served.
        assert (await slow.response(timeout=3))[0] == 408
        await client.send(head(len(BODY)) + BODY)
        assert (await client.response())[0] == 200


async def test_past_the_cap_a_new_connection_closes_the_oldest_unauthenticated(
    tmp_path: Path,
) -> None:
    async with served(tmp_path, limits(max_unauthenticated=3)) as gw:
        keyed = await gw.connect()
        await keyed.send(head(len(BODY)) + BODY)
        assert (await keyed.response())[0] == 200  # a key accepted: no longer counted
        idle = [await gw.connect() for _ in range(3)]
        await asyncio.sleep(0.05)
        assert not gw.guard.closed
        newest = await gw.connect()
        assert await idle[0].closed_within(1)
        assert gw.guard.closed == {"evicted": 1}
        # The keyed connection is still served, and so is the newcomer.
        await keyed.send(head(len(BODY)) + BODY)
        assert (await keyed.response())[0] == 200
        await newest.send(head(len(BODY)) + BODY)
        assert (await newest.response())[0] == 200


async def test_a_busy_pool_answers_503_after_the_acquire_timeout(tmp_path: Path) -> None:
    async with served(tmp_path, limits(), upstream_pool_size=1) as gw:
        gw.agent.upstream.acquire_timeout_s = 0.3
        gw.engine.hold = True
        first = await gw.connect()
        await first.send(head(len(BODY)) + BODY)  # holds the one connection
        while gw.engine.completions == 0:
            await asyncio.sleep(0.01)
        client = await gw.connect()
        started = time.monotonic()
        await client.send(head(len(BODY)) + BODY)
        status, headers, body = await client.response()
        assert (status, code(body), headers["retry-after"]) == (503, "upstream_busy", "1")
        assert 0.25 < time.monotonic() - started < 2


async def test_an_engine_that_sends_no_first_byte_is_a_502_after_the_read_timeout(
    tmp_path: Path,
) -> None:
    async with served(tmp_path, limits(), upstream_read_timeout_s=0.3) as gw:
        gw.engine.hold = True
        client = await gw.connect()
        started = time.monotonic()
        await client.send(head(len(BODY)) + BODY)
        status, _, body = await client.response()
        assert (status, code(body)) == (502, "engine_error")
        assert "sent nothing for 0.3 s" in json.loads(body)["error"]["message"]
        assert 0.25 < time.monotonic() - started < 2


async def test_the_pool_waits_for_a_free_connection_at_most_its_acquire_timeout() -> None:
    engine = Engine()
    engine.hold = True
    server = await asyncio.start_server(engine.serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    pool = UpstreamPool(limit=1, connect_timeout_s=2, read_timeout_s=5, acquire_timeout_s=0.2)

    async def exchange() -> None:
        async with pool.post(url, "/v1/completions", b"{}") as response:
            await response.read()

    holder = asyncio.create_task(exchange())
    while engine.completions == 0:
        await asyncio.sleep(0.01)
    started = time.monotonic()
    with pytest.raises(PoolBusy, match=r"all 1 connections to the engine stayed busy for 0\.2 s"):
        await exchange()
    assert 0.15 < time.monotonic() - started < 1
    assert not pool._waiters  # the timed-out waiter left no turn behind
    holder.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await holder
    server.close()


async def test_connecting_to_an_engine_that_never_accepts_times_out() -> None:
    # A listening socket whose accept queue is full: the kernel drops further SYNs, so a
    # connect neither succeeds nor fails (an engine host that is down behind a firewall).
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    await asyncio.sleep(0.1)
    pool = UpstreamPool(limit=4, connect_timeout_s=0.3, read_timeout_s=5)
    started = time.monotonic()
    try:
        with pytest.raises(UpstreamError, match=r"timed out \(0\.3 s\)"):
            async with pool.post(f"http://127.0.0.1:{port}", "/v1/completions", b"{}"):
                pass
        assert 0.25 < time.monotonic() - started < 2
        assert pool._open == 0
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
