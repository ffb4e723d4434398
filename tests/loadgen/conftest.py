"""Fixtures: the reference streaming server as a real process, and a canned raw-HTTP server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


class RefServerProcess:
    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "loadgen.refserver", "--port", "0", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("PORT "), f"reference server did not start: {line!r}"
        self.port = int(line.split()[1])
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def ground_truth(self) -> dict[str, dict[str, Any]]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/ground-truth") as resp:
            data: dict[str, dict[str, Any]] = json.load(resp)
        return data

    def reset(self) -> None:
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/ground-truth/reset", method="POST"
        )
        urllib.request.urlopen(req).close()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture(scope="session")
def refserver() -> Iterator[RefServerProcess]:
    """TTFT 30 ms, one chunk every 5 ms."""
    server = RefServerProcess("--ttft-ms", "30", "--itl-ms", "5")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def refserver_no_usage() -> Iterator[RefServerProcess]:
    server = RefServerProcess("--ttft-ms", "5", "--itl-ms", "1", "--no-usage")
    yield server
    server.stop()


CannedFactory = Callable[[bytes], Awaitable[str]]


@pytest.fixture
async def canned_server() -> AsyncIterator[CannedFactory]:
    """Starts a raw server that answers every request with `body` (sent in small pieces,
    the headers saying `Connection: close`) and closes: for broken or odd streams."""
    servers: list[asyncio.Server] = []

    async def start(body: bytes) -> str:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
            )
            for i in range(0, len(body), 7):  # split events across reads on purpose
                writer.write(body[i : i + 7])
                await writer.drain()
                await asyncio.sleep(0)
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(server)
        port = server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()
