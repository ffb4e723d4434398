"""A deterministic OpenAI-style streaming server: the load generator's reference target.

Not the simulator (gpu_agent/sim models an engine); this one just keeps a fixed schedule so a
client's figures can be checked against it: the first content chunk leaves `ttft` after the
request arrives, then one chunk every `itl` (or `burst` chunks per write). It records, per
response id, the server-side arrival time and the time the first content chunk was written,
served at `GET /ground-truth`. Used by tests/loadgen and lab/bench_loadgen.py.

    python -m loadgen.refserver --port 0 --ttft-ms 20 --itl-ms 5
    (prints "PORT <n>" once listening)
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from loadgen.loops import new_runner


@dataclass(frozen=True, slots=True)
class Schedule:
    ttft_s: float = 0.020
    itl_s: float = 0.005
    burst: int = 1  # content events per write
    usage: bool = True
    # Spread of the first-token delay, deterministic per request (golden-ratio sequence), so
    # streams drift out of lockstep as they do when real outputs differ in length.
    jitter_s: float = 0.0


def _chunk(
    rid: str,
    created: int,
    model: str,
    chat: bool,
    text: str | None,
    finish: str | None = None,
    role: bool = False,
) -> bytes:
    if chat:
        delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else {}
        if text is not None:
            delta["content"] = text
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
        kind = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": text or "", "finish_reason": finish}
        kind = "text_completion"
    body = {"id": rid, "object": kind, "created": created, "model": model, "choices": [choice]}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


class RefServer:
    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self.counter = itertools.count()
        self.truth: dict[str, dict[str, Any]] = {}

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.completions)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        app.router.add_get("/ground-truth", self.ground_truth)
        app.router.add_post("/ground-truth/reset", self.reset)
        return app

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "ref-model"}]})

    async def ground_truth(self, request: web.Request) -> web.Response:
        return web.json_response(self.truth)

    async def reset(self, request: web.Request) -> web.Response:
        self.truth.clear()
        return web.json_response({})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        received = time.perf_counter()
        received_loop = loop.time()
        arrived_unix = time.time()  # headers parsed, body not yet read
        body = await request.json()
        number = next(self.counter)
        rid = f"cmpl-{number}"
        ttft = self.schedule.ttft_s + self.schedule.jitter_s * ((number * 0.6180339887) % 1.0)
        chat = request.path.endswith("/chat/completions")
        tokens = int(body.get("max_tokens") or 16)
        model = str(body.get("model", "ref-model"))
        record: dict[str, Any] = {
            "tier": request.headers.get("X-Tiergate-Tier"),
            "arrived_unix": arrived_unix,
            "received_unix": time.time(),
        }
        self.truth[rid] = record
        created = int(time.time())
        prompt_tokens = len(str(body.get("messages") or body.get("prompt") or "").split())
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": tokens,
            "total_tokens": prompt_tokens + tokens,
        }
        if not body.get("stream"):
            await asyncio.sleep(ttft + self.schedule.itl_s * (tokens - 1))
            return web.json_response(
                {
                    "id": rid,
                    "object": "chat.completion",
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "length",
                            "message": {"role": "assistant", "content": " tok" * tokens},
                        }
                    ],
                    "usage": usage,
                }
            )
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        if chat:  # vLLM opens with a role-only chunk whose content is empty
            await resp.write(_chunk(rid, created, model, chat, None, role=True))
        pending: list[bytes] = []
        for k in range(tokens):
            pending.append(_chunk(rid, created, model, chat, " tok"))
            if len(pending) < self.schedule.burst and k < tokens - 1:
                continue
            due = received_loop + ttft + self.schedule.itl_s * k
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if "server_ttft_s" not in record:
                now = time.perf_counter()
                record["first_chunk_unix"] = time.time()
                record["server_ttft_s"] = now - received
            await resp.write(b"".join(pending))
            pending.clear()
        tail = _chunk(rid, created, model, chat, None if chat else "", finish="length")
        if self.schedule.usage:
            tail += (
                b"data: "
                + json.dumps(
                    {
                        "id": rid,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [],
                        "usage": usage,
                    }
                ).encode()
                + b"\n\n"
            )
        await resp.write(tail + b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


async def serve(schedule: Schedule, host: str, port: int) -> None:
    runner = web.AppRunner(RefServer(schedule).app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=4096)
    await site.start()
    bound = runner.addresses[0][1]
    sys.stdout.write(f"PORT {bound}\n")
    sys.stdout.flush()
    await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m loadgen.refserver")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ttft-ms", type=float, default=20.0)
    p.add_argument("--itl-ms", type=float, default=5.0)
    p.add_argument("--burst", type=int, default=1)
    p.add_argument("--jitter-ms", type=float, default=0.0, help="spread of the TTFT")
    p.add_argument("--no-usage", action="store_true")
    args = p.parse_args(argv)
    schedule = Schedule(
        args.ttft_ms / 1000,
        args.itl_ms / 1000,
        max(args.burst, 1),
        not args.no_usage,
        args.jitter_ms / 1000,
    )
    with new_runner() as runner:
        runner.run(serve(schedule, args.host, args.port))


if __name__ == "__main__":
    main()
