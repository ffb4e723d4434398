"""OpenAI-shaped error responses (DESIGN.md 3): ``{"error": {"message", "type", "code"}}``."""

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
    413: "invalid_request_error",
    429: "rate_limit_error",
    502: "upstream_error",
    503: "service_unavailable",
}


def error_body(status: int, message: str, code: str) -> bytes:
    error = {"message": message, "type": _TYPES.get(status, "api_error"), "code": code}
    return json.dumps({"error": error}).encode()


def sse_error(message: str, code: str, status: int = 502) -> bytes:
    """The end of a stream that broke mid-way: an error event, then [DONE]."""
    return b"data: " + error_body(status, message, code) + b"\n\ndata: [DONE]\n\n"


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
    ]
    if retry_after_s is not None:
        # Retry-After takes whole seconds; the OpenAI SDK also reads retry-after-ms.
        headers.append((b"retry-after", str(max(1, math.ceil(retry_after_s))).encode()))
        headers.append((b"retry-after-ms", str(max(1, round(retry_after_s * 1000))).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
