"""The ASGI app: the two completion routes go straight to the gateway's plain ASGI handler;
everything else (/health, /metrics, /v1/models, /agent/v1/...) is a small Starlette app that
also runs the agent's lifespan."""

from __future__ import annotations

import contextlib
import hmac
import os
from collections.abc import AsyncIterator

import aiohttp
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gpu_agent.agent import Agent
from gpu_agent.errors import error_body, retry_headers
from gpu_agent.gateway import Gateway
from gpu_agent.keys import unknown_key_message
from gpu_agent.telemetry import parse_engine_metrics
from gpu_agent.types import Receive, Scope, Send


def _error(status: int, message: str, code: str) -> Response:
    headers = {name.decode(): value.decode() for name, value in retry_headers(status, None)}
    return Response(
        error_body(status, message, code), status, headers, media_type="application/json"
    )


async def _http_error(request: Request, exc: Exception) -> Response:
    # Starlette's own 404 and 405 (unknown path, wrong method) in the gateway's error shape.
    assert isinstance(exc, HTTPException)
    code = "not_found" if exc.status_code == 404 else "method_not_allowed"
    response = _error(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}", code)
    if exc.headers:
        response.headers.update(exc.headers)
    return response


def _bearer(request: Request) -> str | None:
    value = request.headers.get("authorization", "")
    return value[7:].strip() if value[:7].lower() == "bearer " else None


def _control_app(agent: Agent) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await agent.start()
        try:
            yield
        finally:
            await agent.aclose()

    async def health(request: Request) -> Response:
        # The gateway answers while the engine is down: the body says which part is unwell.
        return JSONResponse(agent.health())

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(agent.registry), media_type=CONTENT_TYPE_LATEST)

    async def models(request: Request) -> Response:
        token = _bearer(request)
        if token is None or agent.keys.lookup(token) is None:
            return _error(401, unknown_key_message(token or ""), "invalid_api_key")
        try:
            async with agent.session.get(agent.engine_url + "/v1/models") as upstream:
                body = await upstream.read()
                status = upstream.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            return _error(503, f"the engine is not reachable: {exc}", "engine_down")
        if status != 200:
            return _error(502, f"engine answered {status} for /v1/models", "engine_error")
        return Response(body, media_type="application/json")

    async def status(request: Request) -> Response:
        token = _bearer(request)
        expected = agent.options.node_token
        if expected is None:
            return _error(401, "this agent has no node token configured", "no_node_token")
        if token is None or not hmac.compare_digest(token.encode(), expected.encode()):
            return _error(401, "invalid node token", "invalid_node_token")
        return JSONResponse(agent.status())

    def refuse_bench_control(request: Request) -> Response | None:
        """Benchmark controls take the node token or a gateway key that may use every tier
        of the running config (the console's own key for the node is one)."""
        token = _bearer(request)
        expected = agent.options.node_token
        if token is None:
            return _error(401, "missing bearer token", "invalid_api_key")
        if expected is not None and hmac.compare_digest(token.encode(), expected.encode()):
            return None
        key = agent.keys.lookup(token)
        if key is None:
            return _error(401, "invalid API key", "invalid_api_key")
        if not set(agent.config.scheduler.queues) <= key.tiers:
            return _error(403, "this key may not use every tier", "tier_not_allowed")
        return None

    async def engine_state(request: Request) -> Response:
        if (refusal := refuse_bench_control(request)) is not None:
            return refusal
        try:
            async with agent.session.get(agent.engine_url + "/metrics") as upstream:
                text = await upstream.text()
                status = upstream.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            return _error(503, f"the engine is not reachable: {exc}", "engine_down")
        if status != 200:
            return _error(502, f"engine answered {status} for /metrics", "engine_error")
        figures = parse_engine_metrics(text)
        load1, load5, _ = os.getloadavg()
        return JSONResponse(
            {
                "engine": {
                    k: figures.get(k)
                    for k in ("prefix_queries", "prefix_hits", "preemptions_total")
                },
                "host": {"load1": load1, "load5": load5, "cpus": os.cpu_count()},
            }
        )

    async def reset_prefix_cache(request: Request) -> Response:
        if (refusal := refuse_bench_control(request)) is not None:
            return refusal
        try:
            async with agent.session.post(agent.engine_url + "/reset_prefix_cache") as upstream:
                status = upstream.status
                detail = (await upstream.text())[:200]
        except (aiohttp.ClientError, TimeoutError) as exc:
            return _error(503, f"the engine is not reachable: {exc}", "engine_down")
        if status in (404, 405):
            message = "the engine has no /reset_prefix_cache (vLLM needs VLLM_SERVER_DEV_MODE=1)"
            return _error(501, message, "not_supported")
        if status != 200:
            return _error(502, f"engine answered {status}: {detail}", "engine_error")
        return JSONResponse({"reset": True})

    routes = [
        Route("/health", health),
        Route("/metrics", metrics),
        Route("/v1/models", models),
        Route("/agent/v1/status", status),
        Route("/agent/v1/engine/state", engine_state),
        Route("/agent/v1/engine/reset-prefix-cache", reset_prefix_cache, methods=["POST"]),
    ]
    return Starlette(
        routes=routes, lifespan=lifespan, exception_handlers={HTTPException: _http_error}
    )


def create_app(agent: Agent) -> object:
    gateway = Gateway(agent)
    control = _control_app(agent)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            path = scope["path"]
            if path == "/v1/chat/completions":
                await gateway.handle(scope, receive, send, chat=True)
                return
            if path == "/v1/completions":
                await gateway.handle(scope, receive, send, chat=False)
                return
        await control(scope, receive, send)

    return app
