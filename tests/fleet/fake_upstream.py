"""A real local OpenAI-like server (Starlette under uvicorn, in a thread) that misbehaves on
purpose, one way per path prefix, for the connection doctor's tests:

    /good/v1/...        correct: models, chat streamed and not; key GOOD_KEY required
    /sse-always/v1/...  answers stream=false with SSE, and streams chunks without `choices`
    /json-stream/v1/... answers stream=true with one JSON completion
    /slow/v1/models     answers after 3 s
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

GOOD_KEY = "sk-good-KEY-0123456789abcdef"
MODELS = ["demo-8b", "demo-70b"]


def _unauthorized() -> JSONResponse:
    return JSONResponse(
        {"error": {"message": "Incorrect API key provided", "type": "auth", "code": 401}},
        status_code=401,
    )


def _authorized(request: Request) -> bool:
    return request.headers.get("authorization") == f"Bearer {GOOD_KEY}"


def _sse(events: list[Any]) -> StreamingResponse:
    async def gen() -> Any:
        for event in events:
            yield f"data: {event if isinstance(event, str) else json.dumps(event)}\n\n"

    return StreamingResponse(gen(), media_type="text/event-stream")


def _completion(model: str) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "OK"},
                "finish_reason": "length",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }


def _chunk(model: str, content: str) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": model,
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}],
    }


async def models(request: Request) -> Response:
    flavour = request.path_params["flavour"]
    if flavour == "slow":
        await asyncio.sleep(3)
    if not _authorized(request):
        return _unauthorized()
    return JSONResponse({"object": "list", "data": [{"id": m, "object": "model"} for m in MODELS]})


async def chat(request: Request) -> Response:
    flavour = request.path_params["flavour"]
    if not _authorized(request):
        return _unauthorized()
    body = await request.json()
    model, stream = body.get("model"), bool(body.get("stream"))
    if model not in MODELS:
        return JSONResponse(
            {"error": {"message": f"The model `{model}` does not exist.", "code": 404}},
            status_code=404,
        )
    if flavour == "sse-always":
        return _sse(
            [{"id": "c1", "object": "chat.completion.chunk", "delta": {"content": "OK"}}, "[DONE]"]
        )
    if flavour == "json-stream" or not stream:
        return JSONResponse(_completion(model))
    return _sse(
        [
            _chunk(model, "O"),
            _chunk(model, "K"),
            {"id": "c1", "choices": [], "usage": {"completion_tokens": 1}},
            "[DONE]",
        ]
    )


app = Starlette(
    routes=[
        Route("/{flavour}/v1/models", models),
        Route("/{flavour}/v1/chat/completions", chat, methods=["POST"]),
    ]
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve() -> Iterator[str]:
    """Run the server in a thread for the duration of the generator; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("fake upstream did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = server.force_exit = True
        thread.join(timeout=10)
