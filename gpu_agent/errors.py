"""OpenAI-shaped error responses (docs/architecture.md#the-request-path):
``{"error": {"message", "type", "code"}}``.

Every error the gateway answers goes through here, the engine's own included
(`engine_error`), so a client sees one shape whatever refused its request; and every 429 and
503 carries Retry-After.
"""

from __future__ import annotations

import json
import math

from gpu_agent.types import Send

# status -> OpenAI error type
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    408: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    431: "invalid_request_error",
    502: "upstream_error",
    503: "service_unavailable",
}
# Retry-After when the refusal itself names no time (a queue timeout, the engine down): soon.
DEFAULT_RETRY_AFTER_S = 1.0
RETRY_STATUSES = (429, 503)
ENGINE_TEXT_LIMIT = 500
# The engine's 4xx keep their status; its 5xx are a 502 (the engine failed, not the gateway),
# except 503, which keeps saying "try again later".
_ENGINE_CODES = {400: "engine_rejected", 404: "model_not_found", 413: "request_too_large"}


def error_body(status: int, message: str, code: str) -> bytes:
    error = {"message": message, "type": _TYPES.get(status, "api_error"), "code": code}
    return json.dumps({"error": error}).encode()


def sse_error(message: str, code: str, status: int = 502) -> bytes:
    """The end of a stream that broke mid-way: an error event, then [DONE]."""
    return b"data: " + error_body(status, message, code) + b"\n\ndata: [DONE]\n\n"


def retry_headers(status: int, retry_after_s: float | None) -> list[tuple[bytes, bytes]]:
    """Retry-After (whole seconds) and retry-after-ms (the OpenAI SDK reads it) for a 429 or
    503, with a default when the refusal gives none; nothing for other statuses."""
    if retry_after_s is None:
        if status not in RETRY_STATUSES:
            return []
        retry_after_s = DEFAULT_RETRY_AFTER_S
    return [
        (b"retry-after", str(max(1, math.ceil(retry_after_s))).encode()),
        (b"retry-after-ms", str(max(1, round(retry_after_s * 1000))).encode()),
    ]


def engine_error(status: int, data: bytes) -> tuple[int, str, str]:
    """(status, message, code) for an engine's error answer, keeping the engine's own message:
    vLLM answers ``{"error": {"message", "type", "param", "code"}}`` (older releases put the
    fields at the top level); anything else is quoted as text."""
    message = None
    try:
        parsed = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        parsed = None
    if isinstance(parsed, dict):
        inner = parsed.get("error")
        fields = inner if isinstance(inner, dict) else parsed
        if isinstance(fields.get("message"), str):
            message = fields["message"]
            if isinstance(fields.get("param"), str) and fields["param"] not in message:
                message = f"{fields['param']}: {message}"
    if message is None:
        message = data.decode("utf-8", "replace").strip() or f"HTTP {status}"
    message = message[:ENGINE_TEXT_LIMIT]
    if status == 503:
        return 503, f"the engine is unavailable: {message}", "engine_unavailable"
    if status >= 500 or status < 400:
        return 502, f"engine error {status}: {message}", "engine_error"
    if status == 429:
        return 429, f"the engine is busy: {message}", "engine_busy"
    return status, message, _ENGINE_CODES.get(status, "engine_rejected")


async def send_error(
    send: Send,
    status: int,
    message: str,
    code: str,
    retry_after_s: float | None = None,
) -> None:
    body = error_body(status, message, code)
    headers: list[tuple[bytes, bytes]] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *retry_headers(status, retry_after_s),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
