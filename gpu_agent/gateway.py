"""The hot path (docs/architecture.md#the-request-path): POST /v1/chat/completions and
/v1/completions as a plain ASGI handler, no framework in between.

Per request: one SHA-256 for the key and the tier from the headers, then the body read under the
edge's bounds (edge.py: its size, the bodies in flight, a deadline), parse the JSON once (model
check, token estimate, vLLM `priority`), wait for the scheduler's release, then relay the
engine's response (upstream.py's client). A stream is relayed as its bytes
arrive, never re-framed (relay.py: its own writer task, so the slot goes back when the engine
finishes, however slowly the client reads); the only look at its bytes is a regex for the first
delta (the scheduler's first-token signal) and, on the last chunks, for `usage`. Body checks are in
bodies.py, the error shapes (the engine's own errors mapped to them) in errors.py.

A watcher task sits on `receive()` for the whole request: when the client goes away it cancels
the handler, which cancels the queue wait or closes the upstream connection (the engine aborts
the request), and the `finally` blocks hand the slot back.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import re
import time
from typing import TYPE_CHECKING, Any

from gpu_agent.bodies import BodyError, engine_body, read_completion
from gpu_agent.edge import BodyBudget, BodyRefused, ClientGone, read_body, trust
from gpu_agent.errors import engine_error, send_error, sse_error
from gpu_agent.keys import unknown_key_message
from gpu_agent.metrics import CANCELLED, CLIENT_TIMEOUT, ERROR, OK
from gpu_agent.relay import BufferBudget, ClientStalled, ClientWriter, FirstDelta
from gpu_agent.types import Receive, Scope, Send
from gpu_agent.upstream import EngineUnreachable, PoolBusy, UpstreamError
from scheduler import Rejected, Request, Ticket

if TYPE_CHECKING:
    from gpu_agent.agent import Agent

log = logging.getLogger("gpu_agent.gateway")

_PROMPT_TOKENS = re.compile(rb'"prompt_tokens":\s*(\d+)')
_COMPLETION_TOKENS = re.compile(rb'"completion_tokens":\s*(\d+)')
_TAIL_BYTES = 4096
_HOP_HEADERS = (b"content-type", b"x-request-id")
# vLLM refuses a non-zero `priority` unless it runs `--scheduling-policy priority`.
_PRIORITY_REFUSED = b"priority scheduling is not enabled"


class _Disconnect:
    """Shared between a request's handler and its disconnect watcher."""

    __slots__ = ("done", "gone", "writer")

    def __init__(self) -> None:
        self.done = False  # the response is complete: a later disconnect is normal
        self.gone = False  # the client left first
        self.writer: ClientWriter | None = None  # a stream's writer, once it has one

    def response_ends(self) -> None:
        self.done = True


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
        self.buffer_budget = BufferBudget(agent.options.client_buffer_total_bytes)
        self.body_budget = BodyBudget(agent.options.body_budget_bytes)

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
        # Everything the headers can refuse is refused before a byte of the body is read
        # (docs/gateway.md, "Bounds"): the key, the tier, the size, the bodies in flight.
        if auth is None or auth[:7].lower() != b"bearer ":
            agent.metrics.auth_failures.labels("missing_key").inc()
            await send_error(
                send, 401, "missing API key (Authorization: Bearer)", "invalid_api_key"
            )
            return
        token = auth[7:].strip().decode("latin-1")
        key = agent.keys.lookup(token)
        if key is None:
            agent.metrics.auth_failures.labels("bad_key").inc()
            await send_error(send, 401, unknown_key_message(token), "invalid_api_key")
            return
        asked = tier_header.decode("latin-1").strip() if tier_header is not None else None
        tier = key.pick_tier(asked)
        if tier is None:
            agent.metrics.auth_failures.labels("tier_not_allowed").inc()
            await send_error(send, 403, f"this key may not use tier {asked!r}", "tier_not_allowed")
            return
        trust(scope)
        limit = agent.options.max_body_bytes
        declared = int(length) if length is not None and length.isdigit() else 0
        try:
            if declared > limit:
                message = f"request body is larger than {limit} bytes"
                raise BodyRefused(413, message, "request_too_large")
            body = await read_body(receive, limit, self.body_budget, declared)
        except BodyRefused as exc:
            await send_error(send, exc.status, exc.message, exc.code)
            return
        except ClientGone:
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
            completion = read_completion(body, chat)
        except BodyError as exc:
            await send_error(send, 400, exc.message, exc.code)
            return
        models = agent.telemetry.models
        if models is not None and completion.model not in models:
            message = f"the model {completion.model!r} does not exist on this node"
            await send_error(send, 404, message, "model_not_found")
            return
        stream = completion.stream
        sent_priority = agent.pass_priority
        # Only the gateway sets `priority`: the tier's, or none (a client's own is removed).
        priority = queue.priority if sent_priority else None
        body = engine_body(completion, body, priority, queue.stream_interval_tokens)
        req_id = self._id_prefix + str(next(self._ids))
        upstream_id = request_id.decode("latin-1") if request_id else req_id

        state = _Disconnect()
        watcher = asyncio.ensure_future(_watch(receive, asyncio.current_task(), state))
        ticket: Ticket | None = None
        waited: float | None = None
        try:
            try:
                ticket = await agent.driver.acquire(
                    Request(req_id, tier, completion.prompt_tokens, completion.max_tokens)
                )
            except Rejected as exc:
                agent.metrics.rejected(tier, exc.reason)
                message = f"tier {tier!r}: {exc}"
                await send_error(send, exc.status, message, exc.reason, exc.retry_after_s)
                return
            waited = time.perf_counter() - t0  # observed when the request ends: off the hop
            if sent_priority and ticket.sent_as is not None:
                # Released by the starvation or the age bound: the engine's own priority queue
                # must not starve it again behind the more urgent requests released after it.
                body = engine_body(completion, body, agent.priority_of(ticket.sent_as))
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
                body = engine_body(completion, body, None)
                await self._forward(send, ticket, path, body, *args[4:], False)
        except asyncio.CancelledError:
            if not state.gone:
                raise
            # Our own watcher cancelled us: the client disconnected. Nothing left to send.
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            stalled = state.writer is not None and state.writer.stalled
            agent.metrics.finished(tier, CLIENT_TIMEOUT if stalled else CANCELLED, None)
        finally:
            state.done = True
            watcher.cancel()
            if ticket is not None:
                ticket.release()
            if waited is not None:
                agent.metrics.released(tier, waited)
            if state.writer is not None:
                await state.writer.close()

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
        `priority` field, so the caller can try again without it. The slot goes back as soon
        as the engine has answered; the client may still be reading after that."""
        agent = self.agent
        options = agent.options
        headers = (("content-type", "application/json"), ("x-request-id", upstream_id))
        writer: ClientWriter | None = None
        ttft: float | None = None
        tail = b""
        try:
            async with agent.upstream.post(agent.engine_url, path, body, headers) as resp:
                out_headers = [h for h in resp.headers if h[0] in _HOP_HEADERS]
                out_headers.append((b"x-tiergate-tier", tier.encode()))
                if resp.status != 200 or not stream:
                    data = await resp.read()
                    if resp.status == 400 and sent_priority and _PRIORITY_REFUSED in data.lower():
                        return False
                    ticket.release()
                    await self._relay_whole(send, resp.status, data, out_headers, tier)
                    return True
                out_headers.append((b"cache-control", b"no-cache"))
                await send({"type": "http.response.start", "status": 200, "headers": out_headers})
                writer = state.writer = ClientWriter(
                    send,
                    self.buffer_budget,
                    options.client_buffer_bytes,
                    options.client_write_timeout_s,
                    state.response_ends,
                )
                first = FirstDelta()
                async for chunk in resp:
                    if ttft is None and first.seen(chunk):
                        ttft = time.perf_counter() - t0
                        # The client's first token first, then the scheduler's bookkeeping.
                        await writer.write(chunk)
                        ticket.first_token()
                    else:
                        await writer.write(chunk)  # waits only while the client is far behind
                    tail = (tail + chunk)[-_TAIL_BYTES:]
            if b"[DONE]" not in tail:
                raise UpstreamError("the engine's stream ended without [DONE]")
        except (UpstreamError, TimeoutError) as exc:
            ticket.release()
            await self._upstream_failed(send, exc, writer, ttft, tier, state)
            return True
        except ClientStalled as exc:
            ticket.release()  # leaving the `async with` closed the upstream: the engine aborts
            self._client_stalled(tier, exc, state)
            return True
        # The engine is done: its slot goes back now, whatever the client's pace.
        ticket.release()
        try:
            await writer.finish()
        except ClientStalled as exc:
            self._client_stalled(tier, exc, state)
            return True
        state.done = True
        prompt, completion = _usage(tail)
        agent.metrics.finished(tier, OK, ttft, prompt, completion)
        return True

    def _client_stalled(self, tier: str, exc: ClientStalled, state: _Disconnect) -> None:
        state.done = True  # the abort is ours: the watcher must not take it for a disconnect
        log.info("tier %s: %s", tier, exc)
        self.agent.metrics.finished(tier, CLIENT_TIMEOUT, None)

    async def _upstream_failed(
        self,
        send: Send,
        exc: BaseException,
        writer: ClientWriter | None,
        ttft: float | None,
        tier: str,
        state: _Disconnect,
    ) -> None:
        agent = self.agent
        agent.metrics.finished(tier, ERROR, ttft)
        detail = str(exc) or type(exc).__name__
        if writer is not None:
            try:
                await writer.finish(sse_error(f"the engine stream broke: {detail}", "engine_error"))
            except ClientStalled as stalled:
                log.info("tier %s: %s", tier, stalled)
            state.done = True
        elif isinstance(exc, EngineUnreachable):
            await send_error(send, 503, f"the engine is not reachable: {detail}", "engine_down")
        elif isinstance(exc, PoolBusy):
            await send_error(send, 503, detail, "upstream_busy")
        else:
            await send_error(send, 502, f"engine error: {detail}", "engine_error")

    async def _relay_whole(
        self,
        send: Send,
        status: int,
        data: bytes,
        headers: list[tuple[bytes, bytes]],
        tier: str,
    ) -> None:
        agent = self.agent
        if status != 200:
            # The engine's refusal in the gateway's shape, keeping the engine's own message.
            agent.metrics.finished(tier, ERROR, None)
            await send_error(send, *engine_error(status, data))
            return
        content_type = b"application/json"
        for name, value in headers:
            if name == b"content-type":
                content_type = value
        out = [h for h in headers if h[0] != b"content-type"]
        out += [(b"content-type", content_type), (b"content-length", str(len(data)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": out})
        await send({"type": "http.response.body", "body": data, "more_body": False})
        prompt, completion = _usage(data)
        agent.metrics.finished(tier, OK, None, prompt, completion)


async def _watch(receive: Receive, task: asyncio.Task[Any] | None, state: _Disconnect) -> None:
    try:
        while (await receive())["type"] != "http.disconnect":
            pass
    except asyncio.CancelledError:
        return
    if not state.done and task is not None:
        state.gone = True
        task.cancel()
