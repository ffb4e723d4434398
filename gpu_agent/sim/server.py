"""HTTP API of the simulated engine (Starlette): vLLM's OpenAI routes plus /sim/v1/*."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gpu_agent.sim.config import SimConfig
from gpu_agent.sim.engine import SimRequest
from gpu_agent.sim.metrics import SimMetrics
from gpu_agent.sim.protocol import (
    ApiError,
    ChunkWriter,
    CompletionParams,
    full_response,
    parse_completion,
)
from gpu_agent.sim.runner import EngineRunner, Tracked

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


def create_app(config: SimConfig) -> Starlette:
    metrics = SimMetrics(config.model_name)
    runner = EngineRunner(config, metrics)
    started = int(time.time())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        runner.start()
        yield
        await runner.stop()

    async def api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return JSONResponse(exc.body(), status_code=exc.status)

    async def completions(request: Request, chat: bool) -> ASGIApp:
        started = time.time()
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ApiError(400, f"the request body is not valid JSON: {exc}") from exc
        params = parse_completion(body, config, chat)
        request_id = request.headers.get("x-request-id") or runner.next_request_id()
        prefix = "chatcmpl" if chat else "cmpl"
        tracked = Tracked(
            SimRequest(
                request_id,
                params.prompt_token_ids,
                params.max_tokens,
                priority=params.priority,
                ignore_eos=params.ignore_eos,
            ),
            response_id=f"{prefix}-{request_id}",
        )
        received_at = getattr(request.app.state, "received_at", None)
        received = received_at(request.scope.get("client")) if received_at else None
        tracked.received_time = min(received or started, started)
        runner.submit(tracked)
        headers = {"x-request-id": request_id}
        if params.stream:
            return EventStream(runner, tracked, params)
        return await _collect(request, runner, tracked, params, headers)

    async def chat_completions(request: Request) -> ASGIApp:
        return await completions(request, chat=True)

    async def text_completions(request: Request) -> ASGIApp:
        return await completions(request, chat=False)

    async def models(request: Request) -> Response:
        data = [
            {
                "id": name,
                "object": "model",
                "created": started,
                "owned_by": "vllm",
                "root": config.model,
                "parent": None,
                "max_model_len": config.max_model_len,
            }
            for name in config.served_model_names
        ]
        return JSONResponse({"object": "list", "data": data})

    async def health(request: Request) -> Response:
        return Response(status_code=200)

    async def prometheus(request: Request) -> Response:
        return Response(metrics.exposition(), media_type=PROMETHEUS_TEXT)

    async def reset_prefix_cache(request: Request) -> Response:
        # vLLM (VLLM_SERVER_DEV_MODE=1) answers 200 with an empty body; the engine loop runs
        # on this event loop, so the cache is never touched mid-step.
        runner.engine.kv.reset_prefix_cache()
        return Response(status_code=200)

    async def gpu(request: Request) -> Response:
        return JSONResponse(runner.gpu())

    async def sim_requests(request: Request) -> Response:
        raw = request.query_params.get("since", "0")
        try:
            since = float(raw)
        except ValueError as exc:
            raise ApiError(400, f"'since' must be a unix timestamp, got {raw!r}", "since") from exc
        return JSONResponse({"simulated": True, "data": runner.requests_since(since)})

    routes = [
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/completions", text_completions, methods=["POST"]),
        Route("/v1/models", models),
        Route("/health", health),
        Route("/metrics", prometheus),
        Route("/reset_prefix_cache", reset_prefix_cache, methods=["POST"]),
        Route("/sim/v1/gpu", gpu),
        Route("/sim/v1/requests", sim_requests),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={ApiError: api_error})
    app.state.runner = runner
    return app


class EventStream:
    """A bare ASGI SSE response: one ``send`` per chunk, no per-chunk generator or task group.

    A watcher task waits for ``http.disconnect``; a client that goes away aborts the request in
    the engine, which frees its KV blocks, and ends the writer.
    """

    def __init__(self, runner: EngineRunner, tracked: Tracked, params: CompletionParams) -> None:
        self.runner = runner
        self.tracked = tracked
        self.params = params

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        tracked = self.tracked
        writer = ChunkWriter(self.params, tracked.response_id, int(tracked.arrival_time))
        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-request-id", tracked.request.request_id.encode()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            self.runner.abort(tracked)
            tracked.queue.put_nowait(([], "abort"))  # wakes the writer up

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            if self.params.chat:
                await send({"type": "http.response.body", "body": writer.role(), "more_body": True})
            first = True
            interval, held = self.params.stream_interval, []
            while True:
                token_ids, reason = await tracked.queue.get()
                if not token_ids and reason == "abort":
                    return
                if interval > 1:
                    # vLLM's stream interval: the first token and the end at once, the rest
                    # when this many have been made since the last piece.
                    held += token_ids
                    if not first and reason is None and len(held) < interval:
                        continue
                    token_ids, held = held, []
                chunk = writer.tokens(token_ids, reason)
                if first:
                    tracked.first_token_sent_time = time.time()  # the write happens in send
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                first = False
                if reason is not None:
                    break
            tail = b""
            if self.params.include_usage:
                tail = writer.usage(tracked.prompt_tokens, tracked.output_tokens)
            await send({"type": "http.response.body", "body": tail + writer.done()})
        finally:
            watcher.cancel()
            self.runner.abort(tracked)  # no-op once finished


async def _wait_disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _collect(
    request: Request,
    runner: EngineRunner,
    tracked: Tracked,
    params: CompletionParams,
    headers: dict[str, str],
) -> Response:
    async def drain() -> list[int]:
        output: list[int] = []
        while True:
            token_ids, reason = await tracked.queue.get()
            output.extend(token_ids)
            if reason is not None:
                return output

    collector = asyncio.ensure_future(drain())
    watcher = asyncio.ensure_future(_wait_disconnect(request))
    try:
        await asyncio.wait({collector, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not collector.done():
            collector.cancel()
            runner.abort(tracked)
    if collector.cancelled():
        return Response(status_code=499)  # nobody is listening; nginx's "client closed"
    sim_request = tracked.request
    body: dict[str, Any] = full_response(
        params,
        tracked.response_id,
        int(tracked.arrival_time),
        collector.result(),
        sim_request.finish_reason.value if sim_request.finish_reason else "abort",
        tracked.prompt_tokens,
        tracked.output_tokens,
    )
    return JSONResponse(body, headers=headers)
