"""The hot path (DESIGN.md 3): POST /v1/chat/completions and /v1/completions as a plain ASGI
handler, no framework in between.

Per request: read the body (size-limited), one SHA-256 for the key, pick the tier, parse the
JSON once (model check, token estimate, vLLM `priority`), wait for the scheduler's release,
then relay the engine's response. A stream is relayed chunk by chunk as aiohttp hands the bytes
over, never re-framed; the only look at its bytes is a regex for the first content delta (the
scheduler's first-token signal) and, on the last chunks, for `usage`.

A watcher task sits on `receive()` for the whole request: when the client goes away it cancels
the handler, which cancels the queue wait or closes the upstream connection (the engine aborts
the request), and the `finally` blocks hand the slot back.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import re
import time
from typing import TYPE_CHECKING, Any

import aiohttp

from gpu_agent.errors import send_error, sse_error
from gpu_agent.metrics import CANCELLED, ERROR, OK
from gpu_agent.types import Receive, Scope, Send
from scheduler import Rejected, Request, Ticket

if TYPE_CHECKING:
    from gpu_agent.agent import Agent

log = logging.getLogger("gpu_agent.gateway")

CHARS_PER_TOKEN = 4  # the usual English BPE ratio; only length grouping reads the estimate
DEFAULT_MAX_TOKENS = 256  # token budget assumed when the client sets none
_FIRST_CONTENT = re.compile(rb'"(?:content|text)":\s*"(?!")')
_PROMPT_TOKENS = re.compile(rb'"prompt_tokens":\s*(\d+)')
_COMPLETION_TOKENS = re.compile(rb'"completion_tokens":\s*(\d+)')
_TAIL_BYTES = 4096
_HOP_HEADERS = (b"content-type", b"x-request-id")
# vLLM refuses a non-zero `priority` unless it runs `--scheduling-policy priority`.
_PRIORITY_REFUSED = b"priority scheduling is not enabled"


class _ClientGone(Exception):
    """The client disconnected before its request body was complete."""


class _Disconnect:
    """Shared between a request's handler and its disconnect watcher."""

    __slots__ = ("done", "gone")

    def __init__(self) -> None:
        self.done = False  # the response is complete: a later disconnect is normal
        self.gone = False  # the client left first


def estimate_prompt_tokens(payload: dict[str, Any], chat: bool, body_len: int) -> int:
    """Cheap prompt size: characters of the text parts / 4, no tokenizer."""
    chars = 0
    if chat:
        messages = payload.get("messages")
        if isinstance(messages, list):
            for message in messages:
                content = message.get("content") if isinstance(message, dict) else None
                if isinstance(content, str):
                    chars += len(content)
                elif isinstance(content, list):  # multi-part content: count the text parts
                    for part in content:
                        if isinstance(part, dict) and isinstance(part.get("text"), str):
                            chars += len(part["text"])
                chars += 4  # role markers, as a chat template adds
    else:
        prompt = payload.get("prompt")
        if isinstance(prompt, str):
            chars = len(prompt)
        elif isinstance(prompt, list):
            chars = body_len
    return max(1, chars // CHARS_PER_TOKEN)


def _usage(data: bytes) -> tuple[int | None, int | None]:
    at = data.rfind(b'"usage"')
    if at < 0:
        return None, None
    prompt = _PROMPT_TOKENS.search(data, at)
    completion = _COMPLETION_TOKENS.search(data, at)
    return (
        int(prompt.group(1)) if prompt else None,
        int(completion.group(1)) if completion else None,
    )


class Gateway:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self._ids = itertools.count(1)
        self._id_prefix = f"tg{os.getpid():x}-"

    async def _read_body(self, receive: Receive, limit: int) -> bytes | None:
        """The whole body, or None once it passes `limit` bytes."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _ClientGone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def handle(self, scope: Scope, receive: Receive, send: Send, chat: bool) -> None:
        t0 = time.perf_counter()
        agent = self.agent
        auth = tier_header = length = request_id = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                auth = value
            elif name == b"x-tiergate-tier":
                tier_header = value
            elif name == b"content-length":
                length = value
            elif name == b"x-request-id":
                request_id = value
        limit = agent.options.max_body_bytes
        too_large = f"request body is larger than {limit} bytes"
        if length is not None and length.isdigit() and int(length) > limit:
            await send_error(send, 413, too_large, "request_too_large")
            return
        try:
            body = await self._read_body(receive, limit)
        except _ClientGone:
            return
        if body is None:
            await send_error(send, 413, too_large, "request_too_large")
            return
        if auth is None or auth[:7].lower() != b"bearer ":
            agent.metrics.auth_failures.labels("missing_key").inc()
            await send_error(
                send, 401, "missing API key (Authorization: Bearer)", "invalid_api_key"
            )
            return
        key = agent.keys.lookup(auth[7:].strip().decode("latin-1"))
        if key is None:
            agent.metrics.auth_failures.labels("bad_key").inc()
            await send_error(send, 401, "invalid API key", "invalid_api_key")
            return
        asked = tier_header.decode("latin-1").strip() if tier_header is not None else None
        tier = key.pick_tier(asked)
        if tier is None:
            agent.metrics.auth_failures.labels("tier_not_allowed").inc()
            await send_error(send, 403, f"this key may not use tier {asked!r}", "tier_not_allowed")
            return
        queues = agent.config.scheduler.queues
        queue = queues.get(tier)
        if queue is None:
            # The key names a tier this node's config lacks (e.g. removed by a new version):
            # serve it in the least urgent tier, where the dispatcher also moves the queued
            # requests of a removed tier, rather than fail traffic during a rollout.
            tier = agent.config.tiers_by_urgency()[-1]
            queue = queues[tier]
        try:
            payload = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            await send_error(send, 400, f"the body is not valid JSON: {exc}", "invalid_json")
            return
        if not isinstance(payload, dict):
            await send_error(send, 400, "the body must be a JSON object", "invalid_json")
            return
        model = payload.get("model")
        models = agent.telemetry.models
        if models is not None and model not in models:
            await send_error(
                send, 404, f"the model {model!r} does not exist on this node", "model_not_found"
            )
            return
        stream = payload.get("stream") is True
        max_tokens = payload.get("max_tokens") or payload.get("max_completion_tokens")
        if not isinstance(max_tokens, int) or max_tokens <= 0:
            max_tokens = DEFAULT_MAX_TOKENS
        prompt_tokens = estimate_prompt_tokens(payload, chat, len(body))
        sent_priority = agent.pass_priority
        if sent_priority:
            payload["priority"] = queue.priority
            body = json.dumps(payload).encode()
        req_id = self._id_prefix + str(next(self._ids))
        upstream_id = request_id.decode("latin-1") if request_id else req_id

        state = _Disconnect()
        watcher = asyncio.ensure_future(_watch(receive, asyncio.current_task(), state))
        ticket: Ticket | None = None
        try:
            try:
                ticket = await agent.driver.acquire(
                    Request(req_id, tier, prompt_tokens, max_tokens)
                )
            except Rejected as exc:
                agent.metrics.rejected(tier, exc.reason)
                message = f"tier {tier!r}: {exc}"
                await send_error(send, exc.status, message, exc.reason, exc.retry_after_s)
                return
            agent.metrics.released(tier, time.perf_counter() - t0)
            if sent_priority and ticket.promoted:
                # Released by the starvation bound: the engine's own priority queue must not
                # starve it again behind the more urgent requests released after it.
                payload["priority"] = agent.promoted_priority
                body = json.dumps(payload).encode()
            if not stream:
                # No first-token signal without a stream: count it as started so it does not
                # hold an awaiting-first-token slot until the whole answer is done.
                ticket.first_token(timed=False)
            path = "/v1/chat/completions" if chat else "/v1/completions"
            args = (send, ticket, path, body, upstream_id, tier, stream, t0, state)
            if not await self._forward(*args, sent_priority):
                # An attached fcfs engine: stop sending `priority`, this request included.
                log.warning("the engine refuses vLLM's priority field; no longer sending it")
                agent.engine_refuses_priority = True
                del payload["priority"]
                body = json.dumps(payload).encode()
                await self._forward(send, ticket, path, body, *args[4:], False)
        except asyncio.CancelledError:
            if not state.gone:
                raise
            # Our own watcher cancelled us: the client disconnected. Nothing left to send.
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            agent.metrics.finished(tier, CANCELLED, None)
        finally:
            state.done = True
            watcher.cancel()
            if ticket is not None:
                ticket.release()

    async def _forward(
        self,
        send: Send,
        ticket: Ticket,
        path: str,
        body: bytes,
        upstream_id: str,
        tier: str,
        stream: bool,
        t0: float,
        state: _Disconnect,
        sent_priority: bool,
    ) -> bool:
        """Relay one upstream exchange; False (nothing sent yet) when the engine refused the
        `priority` field, so the caller can try again without it."""
        agent = self.agent
        headers = {"content-type": "application/json", "x-request-id": upstream_id}
        started = False
        ttft: float | None = None
        tail = b""
        try:
            async with agent.session.post(
                agent.engine_url + path, data=body, headers=headers
            ) as resp:
                out_headers = [
                    (name.lower().encode(), value.encode())
                    for name, value in resp.headers.items()
                    if name.lower().encode() in _HOP_HEADERS
                ]
                out_headers.append((b"x-tiergate-tier", tier.encode()))
                if resp.status != 200 or not stream:
                    data = await resp.read()
                    if resp.status == 400 and sent_priority and _PRIORITY_REFUSED in data.lower():
                        return False
                    await self._relay_whole(send, resp.status, data, out_headers, tier, t0)
                    return True
                out_headers.append((b"cache-control", b"no-cache"))
                await send({"type": "http.response.start", "status": 200, "headers": out_headers})
                started = True
                async for chunk in resp.content.iter_any():
                    if ttft is None and _FIRST_CONTENT.search(chunk):
                        ttft = time.perf_counter() - t0
                        ticket.first_token()
                    tail = (tail + chunk)[-_TAIL_BYTES:]
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if b"[DONE]" not in tail:
                raise aiohttp.ClientPayloadError("the engine's stream ended without [DONE]")
            state.done = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            prompt, completion = _usage(tail)
            agent.metrics.finished(tier, OK, ttft, prompt, completion)
        except (aiohttp.ClientError, TimeoutError) as exc:
            await self._upstream_failed(send, exc, started, ttft, tier, state)
        return True

    async def _upstream_failed(
        self,
        send: Send,
        exc: BaseException,
        started: bool,
        ttft: float | None,
        tier: str,
        state: _Disconnect,
    ) -> None:
        agent = self.agent
        agent.metrics.finished(tier, ERROR, ttft)
        detail = str(exc) or type(exc).__name__
        if started:
            state.done = True
            await send(
                {
                    "type": "http.response.body",
                    "body": sse_error(f"the engine stream broke: {detail}", "engine_error"),
                    "more_body": False,
                }
            )
        elif isinstance(exc, aiohttp.ClientConnectorError):
            await send_error(send, 503, f"the engine is not reachable: {detail}", "engine_down")
        else:
            await send_error(send, 502, f"engine error: {detail}", "engine_error")

    async def _relay_whole(
        self,
        send: Send,
        status: int,
        data: bytes,
        headers: list[tuple[bytes, bytes]],
        tier: str,
        t0: float,
    ) -> None:
        agent = self.agent
        if status >= 500:
            # The engine's own text may not be OpenAI-shaped; wrap it.
            text = data[:500].decode("utf-8", "replace")
            agent.metrics.finished(tier, ERROR, None)
            await send_error(send, 502, f"engine error {status}: {text}", "engine_error")
            return
        content_type = b"application/json"
        for name, value in headers:
            if name == b"content-type":
                content_type = value
        out = [h for h in headers if h[0] != b"content-type"]
        out += [(b"content-type", content_type), (b"content-length", str(len(data)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": out})
        await send({"type": "http.response.body", "body": data, "more_body": False})
        if status == 200:
            prompt, completion = _usage(data)
            agent.metrics.finished(tier, OK, None, prompt, completion)
        else:
            agent.metrics.finished(tier, ERROR, None)


async def _watch(receive: Receive, task: asyncio.Task[Any] | None, state: _Disconnect) -> None:
    try:
        while (await receive())["type"] != "http.disconnect":
            pass
    except asyncio.CancelledError:
        return
    if not state.done and task is not None:
        state.gone = True
        task.cancel()
