"""The "Test connection" doctor's judgement: pure functions from what an HTTP attempt
produced (a `Reply`) to a `Step` an operator can act on. No I/O; probes.py makes the calls.

The failure classes follow seed 000's troubleshooting list (section 5), in its order of
checking: authentication (401), network (refused / timeout / DNS / proxy), path (404, the base
URL with or without /v1), then parsing (`choices` missing because streamed and non-streamed
answers were mixed). Each step says in plain words what to change.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

# Transport failures, as probes.py names them.
REFUSED, TIMEOUT, DNS, PROXY, TLS, OTHER = "refused", "timeout", "dns", "proxy", "tls", "other"

_SUFFIXES = ("/chat/completions", "/completions", "/models")


@dataclass
class Step:
    name: str
    ok: bool
    detail: str
    fix: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Reply:
    """One attempt: an HTTP answer (status set) or a transport failure (error set).
    Bodies are truncated and already scrubbed of the key by the caller."""

    url: str
    status: int | None = None
    error: str = ""
    error_text: str = ""
    content_type: str = ""
    body: str = ""

    @property
    def is_sse(self) -> bool:
        return "text/event-stream" in self.content_type or self.body.lstrip().startswith("data:")

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


def plural(count: int, noun: str) -> str:
    """ "1 model", "2 models"."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def base_url_candidates(base_url: str) -> list[str]:
    """The configured form first, then the same URL with /v1 added or removed. A full
    .../chat/completions URL (seed 000's contradictory advice) is cut back to its base."""
    url = base_url.strip().rstrip("/")
    for suffix in _SUFFIXES:
        if url.endswith(suffix):
            url = url[: -len(suffix)].rstrip("/")
            break
    other = url[: -len("/v1")] if url.endswith("/v1") else url + "/v1"
    return [url, other] if other != url else [url]


def key_hygiene(key: str) -> Step:
    """Mistakes visible in the key itself, before any request."""
    if not key:
        return Step(
            "API key",
            False,
            "No API key is stored for this endpoint.",
            "Set the endpoint's API key (servers without auth accept any value).",
        )
    if key.lower().startswith("bearer "):
        return Step(
            "API key",
            False,
            "The stored key starts with 'Bearer ': it would be sent as 'Bearer Bearer ...'.",
            "Store the key alone; the 'Bearer ' prefix is added when the request is sent.",
        )
    if key != key.strip() or any(ch in key for ch in "\r\n\t "):
        return Step(
            "API key",
            False,
            "The key holds spaces or line breaks (often pasted from a shell).",
            "Paste the key again without surrounding whitespace or quotes.",
        )
    if key[:1] in "'\"" or key[-1:] in "'\"":
        return Step(
            "API key", False, "The key is wrapped in quotes.", "Store the key without quotes."
        )
    return Step("API key", True, "Stored, sent as 'Authorization: Bearer <key>'.")


def transport_step(name: str, reply: Reply) -> Step:
    host = urlsplit(reply.url).netloc or reply.url
    if reply.error == REFUSED:
        return Step(
            name,
            False,
            f"Connection to {host} refused: nothing listens there.",
            "Check the base URL's host and port and that the server is running; a local "
            "proxy or firewall can refuse too (check HTTP_PROXY / HTTPS_PROXY / NO_PROXY).",
        )
    if reply.error == TIMEOUT:
        return Step(
            name,
            False,
            f"No answer from {host} in time.",
            "Check that a firewall or outbound policy lets the console reach the host, and "
            "that the server is not overloaded; then retry.",
        )
    if reply.error == DNS:
        return Step(
            name,
            False,
            f"The host name in {host} does not resolve.",
            "Check the host name's spelling and the console's DNS, or use an IP address.",
        )
    if reply.error == PROXY:
        return Step(
            name,
            False,
            f"The proxy between the console and {host} failed ({reply.error_text}).",
            "Fix HTTP_PROXY / HTTPS_PROXY for the console, or add the host to NO_PROXY.",
        )
    if reply.error == TLS:
        return Step(
            name,
            False,
            f"TLS handshake with {host} failed ({reply.error_text}).",
            "Use http:// for a plain-HTTP server, or fix the server's certificate.",
        )
    return Step(
        name,
        False,
        f"Request to {reply.url} failed: {reply.error_text or reply.error}.",
        "Check the base URL.",
    )


def _error_message(reply: Reply) -> str:
    data = reply.json()
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
        if data.get("detail"):
            return str(data["detail"])[:300]
    return reply.body.strip()[:200]


def http_error_step(
    name: str, reply: Reply, model: str = "", known_models: list[str] | None = None
) -> Step:
    status = reply.status or 0
    said = _error_message(reply)
    said_part = f" The server said: {said}" if said else ""
    if status in (401, 403):
        return Step(
            name,
            False,
            f"HTTP {status} from {reply.url}: the key was refused.{said_part}",
            "Check that the key is right and belongs to this base URL (not another provider's "
            "or channel's), that it is sent as 'Authorization: Bearer <key>' with the Bearer "
            "prefix, that no second Authorization header is added (a proxy or default headers), "
            "and that no shell variable overrides it.",
        )
    if status == 404:
        if model and "model" in said.lower():
            choices = ", ".join((known_models or [])[:8]) or "the IDs listed by /v1/models"
            return Step(
                name,
                False,
                f"HTTP 404: model '{model}' is unknown here.{said_part}",
                f"Use a model ID the endpoint serves: {choices}.",
            )
        return Step(
            name,
            False,
            f"HTTP 404 at {reply.url}: the path does not exist.{said_part}",
            "The base URL's path is wrong: give the base the OpenAI SDK expects (usually "
            "ending in /v1), never the full .../chat/completions path.",
        )
    if status == 429:
        return Step(
            name,
            False,
            f"HTTP 429: rate limited or queue full.{said_part}",
            "Retry later, or raise the key's quota / the gateway's queue depth.",
        )
    if status >= 500:
        return Step(
            name,
            False,
            f"HTTP {status}: the server failed.{said_part}",
            "Look at the server's logs; for a Tiergate gateway, check the node's engine health.",
        )
    return Step(
        name,
        False,
        f"HTTP {status} from {reply.url}.{said_part}",
        "Check the request and the server's docs.",
    )


def models_of(reply: Reply) -> list[str] | None:
    """Model IDs of an OpenAI `/models` answer, or None when the answer is not one."""
    if reply.status != 200:
        return None
    data = reply.json()
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        return None
    return [str(m["id"]) for m in data["data"] if isinstance(m, dict) and "id" in m]


def choose_base(configured: str, replies: list[Reply]) -> tuple[Step, str | None, list[str]]:
    """Judge the /models attempts on each base-URL form: (step, working base, model IDs)."""
    name = "Base URL"
    for reply in replies:
        ids = models_of(reply)
        if ids is not None:
            base = reply.url[: -len("/models")]
            if base == configured:
                found = plural(len(ids), "model")
                return Step(name, True, f"{base}/models answers ({found})."), base, ids
            return (
                Step(
                    name,
                    False,
                    f"{configured}/models does not answer, but {base}/models does.",
                    f"Set the base URL to {base} (clients append /chat/completions themselves).",
                ),
                base,
                ids,
            )
    # Nothing worked: report the most telling failure, in the seed's order of checking.
    for reply in replies:
        if reply.status in (401, 403):
            return http_error_step(name, reply), None, []
    for reply in replies:
        if reply.error:
            return transport_step(name, reply), None, []
    for reply in replies:
        if reply.status == 200:
            return (
                Step(
                    name,
                    False,
                    f"{reply.url} answered, but not with an OpenAI model list.",
                    "Point the base URL at the OpenAI-compatible API root (usually ending in /v1).",
                ),
                None,
                [],
            )
    tried = " and ".join(r.url for r in replies)
    if all(r.status == 404 for r in replies):
        return (
            Step(
                name,
                False,
                f"Neither {tried} exists (HTTP 404).",
                "The base URL's path is wrong: use the API root the provider documents for "
                "OpenAI clients (with or without /v1), not a full .../chat/completions path.",
            ),
            None,
            [],
        )
    return http_error_step(name, replies[0]), None, []


def models_step(ids: list[str], default_model: str) -> Step:
    if not ids:
        return Step(
            "Models", False, "The endpoint lists no models.", "Check the key's model permissions."
        )
    listed = ", ".join(ids[:8]) + (" ..." if len(ids) > 8 else "")
    if default_model and default_model not in ids:
        return Step(
            "Models",
            False,
            f"Default model '{default_model}' is not among: {listed}.",
            "Pick a default model the endpoint serves (or fetch the models again).",
        )
    return Step("Models", True, f"{plural(len(ids), 'model')} listed: {listed}.")


def _sse_events(body: str) -> list[str]:
    return [line[len("data:") :].strip() for line in body.splitlines() if line.startswith("data:")]


def chat_step(reply: Reply, stream: bool, model: str, known_models: list[str]) -> Step:
    name = "Chat completion (streamed)" if stream else "Chat completion (not streamed)"
    if reply.error:
        return transport_step(name, reply)
    if reply.status != 200:
        return http_error_step(name, reply, model, known_models)
    if not stream:
        if reply.is_sse:
            return Step(
                name,
                False,
                "Asked for stream=false but the answer is an SSE stream ('data:' lines): "
                "a client reading choices[0].message finds no `choices`.",
                "Streamed and non-streamed answers are being mixed: read this endpoint as a stream "
                "(choices[0].delta), or fix the server/proxy that forces streaming.",
            )
        data = reply.json()
        if not isinstance(data, dict):
            return Step(
                name,
                False,
                "The answer is not JSON.",
                "Check that the base URL is an OpenAI-compatible API.",
            )
        choices = data.get("choices")
        if (
            not choices
            or not isinstance(choices, list)
            or not isinstance(choices[0], dict)
            or "message" not in choices[0]
        ):
            has = ", ".join(sorted(data)) or "nothing"
            return Step(
                name,
                False,
                f"The JSON answer has no choices[0].message (it holds: {has}).",
                "If it holds choices[0].delta, the server streamed in JSON form: streamed and "
                "non-streamed answers are mixed; otherwise read the error it returned.",
            )
        return Step(name, True, "One token generated, answer parsed from choices[0].message.")
    if not reply.is_sse:
        data = reply.json()
        if isinstance(data, dict) and data.get("choices"):
            return Step(
                name,
                False,
                "Asked for stream=true but got a single JSON answer: a client iterating "
                "chunks for choices[0].delta gets nothing.",
                "Streamed and non-streamed answers are being mixed: turn streaming off in the "
                "client, or use a server/proxy that streams (text/event-stream).",
            )
        return Step(
            name,
            False,
            "Asked for a stream but the answer is neither SSE nor a chat completion.",
            "Check that the base URL is an OpenAI-compatible API.",
        )
    events = _sse_events(reply.body)
    chunks, missing = 0, 0
    for event in events:
        if event == "[DONE]":
            continue
        try:
            chunk = json.loads(event)
        except ValueError:
            missing += 1
            continue
        if isinstance(chunk, dict) and "error" in chunk:
            return Step(
                name,
                False,
                f"The stream carried an error: {str(chunk['error'])[:200]}",
                "Read the error; the stream broke on the server side.",
            )
        chunks += 1
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        # The final usage chunk (stream_options.include_usage) legitimately has choices=[].
        if choices is None or (
            not choices and not (isinstance(chunk, dict) and chunk.get("usage"))
        ):
            missing += 1
    if chunks == 0:
        return Step(name, False, "The stream held no chunks.", "Check the server's logs.")
    if missing:
        return Step(
            name,
            False,
            f"{missing} of {chunks} stream chunks have no `choices`.",
            "Streamed and non-streamed formats are mixed: every streamed chunk must carry "
            "choices[0].delta; fix the server or proxy that rewrites the stream.",
        )
    if "[DONE]" not in events:
        return Step(
            name, True, f"{chunks} chunks, but no final 'data: [DONE]' (clients may wait for it)."
        )
    return Step(name, True, f"{chunks} chunks, each with choices[0].delta, ended by [DONE].")
