"""``python -m lab.relay_floor``: the gateway's hop and nothing else, for benchmarks.

A pass-through on the gateway's own stack (uvicorn with httptools on uvloop, the hot path's
upstream pool of gpu_agent/upstream.py): every POST goes to the engine as it came, and the
engine's answer comes back chunk by chunk as it arrives. No keys, tiers, scheduler, telemetry,
metrics or first-token detection. It measures what any HTTP hop in front of the engine costs
(the headline's arm (p)), so that the gateway's distance from going direct can be split into
the hop's share and the share of what the gateway does on top of it. Not for production: it
authenticates nothing. `GET /health` answers 200 once it listens.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import uvicorn

from gpu_agent.types import Receive, Scope, Send
from gpu_agent.upstream import UpstreamError, UpstreamPool

_KEPT = (b"content-type", b"x-request-id")  # the response headers the gateway relays too


def relay_app(engine_url: str, pool_size: int = 1024) -> Any:
    """The ASGI app relaying to `engine_url` (no /v1)."""
    pool: list[UpstreamPool] = []  # made in the server's loop, at startup

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                pool.append(UpstreamPool(pool_size, connect_timeout_s=5, read_timeout_s=600))
                await send({"type": "lifespan.startup.complete"})
            pool[0].close()
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["method"] != "POST":
            body, status = b'{"status":"ok"}', 200 if scope["path"] == "/health" else 404
            await send({"type": "http.response.start", "status": status, "headers": []})
            await send({"type": "http.response.body", "body": body})
            return
        parts = []
        while True:
            message = await receive()
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        headers = [("content-type", "application/json")]
        started = False
        try:
            async with pool[0].post(engine_url, scope["path"], b"".join(parts), headers) as r:
                kept = [h for h in r.headers if h[0] in _KEPT]
                await send({"type": "http.response.start", "status": r.status, "headers": kept})
                started = True
                async for chunk in r:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except UpstreamError as exc:
            if started:  # cut short: the client sees the stream end without [DONE]
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            await send({"type": "http.response.start", "status": 502, "headers": []})
            await send({"type": "http.response.body", "body": str(exc).encode()})
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.relay_floor", description=__doc__)
    parser.add_argument("--engine-url", required=True, help="the engine's base URL (no /v1)")
    parser.add_argument("--listen", default="127.0.0.1:8100", help="HOST:PORT")
    args = parser.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    uvicorn.run(
        relay_app(args.engine_url.rstrip("/")),
        host=host,
        port=int(port),
        log_level="warning",
        access_log=False,  # as the gateway
        lifespan="on",
        proxy_headers=False,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
