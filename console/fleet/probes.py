"""Outbound calls to model endpoints (httpx): the doctor's attempts and model listing.
Thin shell around doctor.py, which does the judging.

The key goes only into the Authorization header; any echo of it in a server's answer is
masked before the answer is kept, so no step, log line or response can carry it.
"""

from __future__ import annotations

import errno
import logging
import socket
from typing import Any

import httpx

from console.fleet import doctor
from console.fleet.crypto import mask
from console.fleet.doctor import Reply, Step

log = logging.getLogger(__name__)

BODY_LIMIT = 64 * 1024
DEFAULT_TIMEOUT_S = 8.0


def _scrub(text: str, key: str) -> str:
    return text.replace(key, mask(key)) if key and len(key) >= 4 else text


def _transport_error(exc: Exception) -> tuple[str, str]:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return doctor.TIMEOUT, text
    if isinstance(exc, httpx.ProxyError):
        return doctor.PROXY, text
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, socket.gaierror):
            return doctor.DNS, text
        if (
            isinstance(cause, ConnectionRefusedError)
            or getattr(cause, "errno", None) == errno.ECONNREFUSED
        ):
            return doctor.REFUSED, text
        cause = cause.__cause__ or cause.__context__
    lowered = text.lower()
    if (
        "name or service not known" in lowered
        or "nodename nor servname" in lowered
        or "getaddrinfo" in lowered
    ):
        return doctor.DNS, text
    if "refused" in lowered:
        return doctor.REFUSED, text
    if "ssl" in lowered or "certificate" in lowered:
        return doctor.TLS, text
    return doctor.OTHER, text


def attempt(client: httpx.Client, method: str, url: str, key: str, payload: Any = None) -> Reply:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        with client.stream(method, url, headers=headers, json=payload) as response:
            body = b""
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) >= BODY_LIMIT:
                    break
    except httpx.HTTPError as exc:
        kind, text = _transport_error(exc)
        return Reply(url=url, error=kind, error_text=_scrub(text, key)[:300])
    return Reply(
        url=url,
        status=response.status_code,
        content_type=response.headers.get("content-type", ""),
        body=_scrub(body[:BODY_LIMIT].decode("utf-8", "replace"), key),
    )


def _client(timeout_s: float, transport: httpx.BaseTransport | None) -> httpx.Client:
    return httpx.Client(
        timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 3.0)),
        follow_redirects=True,
        transport=transport,
    )


def _chat_body(model: str, stream: bool) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": "Say OK."}],
        "max_tokens": 1,
        "stream": stream,
        "temperature": 0,
    }


def run_doctor(
    base_url: str,
    key: str,
    default_model: str = "",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    transport: httpx.BaseTransport | None = None,
) -> list[Step]:
    """Every step of the connection test, in order; stops early where later steps cannot help."""
    return diagnose(base_url, key, default_model, timeout_s, transport)[0]


def diagnose(
    base_url: str,
    key: str,
    default_model: str = "",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    transport: httpx.BaseTransport | None = None,
) -> tuple[list[Step], list[str]]:
    """(run_doctor's steps, the model IDs the endpoint listed, [] when none was listed), so
    the caller can keep what the test found."""
    found: list[str] = []
    steps = [doctor.key_hygiene(key)]
    candidates = doctor.base_url_candidates(base_url)
    with _client(timeout_s, transport) as client:
        replies: list[Reply] = []
        for candidate in candidates:
            reply = attempt(client, "GET", f"{candidate}/models", key)
            replies.append(reply)
            if doctor.models_of(reply) is not None or reply.error in (
                doctor.REFUSED,
                doctor.DNS,
                doctor.TIMEOUT,
            ):
                break  # a working form, or a host that no path will fix
        base_step, base, ids = doctor.choose_base(candidates[0], replies)
        steps.append(base_step)
        if base is None:
            return steps, found
        found = list(ids)
        steps.append(doctor.models_step(ids, default_model))
        model = default_model or (ids[0] if ids else "")
        if not model:
            steps.append(Step("Chat completion", False, "No model to try.", "Set a default model."))
            return steps, found
        for stream in (False, True):
            reply = attempt(
                client, "POST", f"{base}/chat/completions", key, _chat_body(model, stream)
            )
            steps.append(doctor.chat_step(reply, stream, model, ids))
    log.info(
        "doctor on %s: %s",
        base_url,
        ", ".join(f"{s.name}={'ok' if s.ok else 'fail'}" for s in steps),
    )
    return steps, found


class FetchError(Exception):
    def __init__(self, step: Step) -> None:
        super().__init__(step.detail)
        self.step = step


def fetch_models(
    base_url: str,
    key: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    transport: httpx.BaseTransport | None = None,
) -> tuple[str, list[str]]:
    """(working base URL, model IDs) from /models, trying the base with and without /v1."""
    candidates = doctor.base_url_candidates(base_url)
    with _client(timeout_s, transport) as client:
        replies = []
        for base in candidates:
            reply = attempt(client, "GET", f"{base}/models", key)
            ids = doctor.models_of(reply)
            if ids is not None:
                return base, ids
            replies.append(reply)
    step, _, _ = doctor.choose_base(candidates[0], replies)
    raise FetchError(step)
