"""A completion request's body as the gateway reads it (docs/architecture.md#the-request-path), pure
and without I/O.

`read_completion` parses the JSON once and takes what the hot path needs (model, stream, a
token estimate); a body the engine must never see is a `BodyError` (400). `engine_body` is the
body sent on: vLLM's `priority` is the gateway's alone to set, so a client's own is replaced by
the tier's or removed, whatever the engine's policy; a tier's `stream_interval_tokens` is
written as vLLM's `stream_interval` on its streams.

JSON has no NaN or infinities, but Python's parser takes `NaN`, `Infinity` and `1e999`; they
are refused here, naming the field, rather than passed to the engine.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 4  # the usual English BPE ratio; only length grouping reads the estimate
DEFAULT_MAX_TOKENS = 256  # token budget assumed when the client sets none


class BodyError(ValueError):
    """A body refused with a 400; the message names the field."""

    def __init__(self, message: str, code: str = "invalid_request") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class _NonFinite(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NonFinite(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e999
        raise _NonFinite(text)
    return value


# Called by the C scanner only for NaN/Infinity literals and for numbers with a fraction or an
# exponent (a body has a few): integers and strings keep the fast path.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)


@dataclass(slots=True)
class Completion:
    payload: dict[str, Any]
    model: str
    stream: bool
    max_tokens: int
    prompt_tokens: int


def _path_of_non_finite(value: Any, path: str) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return path
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        where = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else key
        found = _path_of_non_finite(item, where)
        if found is not None:
            return found
    return None


def _parse(body: bytes) -> Any:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(f"the body is not UTF-8: {exc}", "invalid_json") from exc
    try:
        return _DECODER.decode(text)
    except _NonFinite as exc:
        # Only now find where it is, for the message: parse again taking the literals.
        where = _path_of_non_finite(json.loads(text), "")
        raise BodyError(
            f"{where or 'the body'}: must be a finite number, got {exc}", "invalid_number"
        ) from None
    except ValueError as exc:
        raise BodyError(f"the body is not valid JSON: {exc}", "invalid_json") from exc


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


def read_completion(body: bytes, chat: bool) -> Completion:
    payload = _parse(body)
    if not isinstance(payload, dict):
        raise BodyError("the body must be a JSON object", "invalid_json")
    model = payload.get("model")
    if model is None:
        raise BodyError("model: required (the name of a model this node serves)", "invalid_model")
    if not isinstance(model, str):
        raise BodyError(
            f"model: must be a string, got {type(model).__name__} {json.dumps(model)[:40]}",
            "invalid_model",
        )
    max_tokens = payload.get("max_tokens") or payload.get("max_completion_tokens")
    if not isinstance(max_tokens, int) or max_tokens <= 0:
        max_tokens = DEFAULT_MAX_TOKENS  # the engine checks the field itself
    return Completion(
        payload=payload,
        model=model,
        stream=payload.get("stream") is True,
        max_tokens=max_tokens,
        prompt_tokens=estimate_prompt_tokens(payload, chat, len(body)),
    )


def engine_body(
    completion: Completion, body: bytes, priority: int | None, stream_interval: int | None = None
) -> bytes:
    """The body to send the engine: with the tier's `priority`, or with none at all (never the
    client's); and, for a stream whose tier sets one, with vLLM's `stream_interval` at least the
    tier's (a client's larger one kept). Unchanged bytes when there is nothing to write or
    remove."""
    payload = completion.payload
    add: dict[str, int] = {}
    if priority is not None:
        add["priority"] = priority
    if stream_interval is not None and completion.stream:
        asked = payload.get("stream_interval")
        if not (type(asked) is int and asked >= stream_interval):
            add["stream_interval"] = stream_interval
    remove = priority is None and "priority" in payload
    if not add and not remove:
        return body
    fresh = not remove and not any(name in payload for name in add)
    payload.update(add)
    if remove:
        del payload["priority"]
    start = body.find(b"{")
    if fresh and start >= 0:
        # Fields the client did not send: written in front of the others rather than the whole
        # body serialised again (the object has at least `model`, so a comma).
        head = b"".join(b'"%s":%d,' % (name.encode(), value) for name, value in add.items())
        return b"{" + head + body[start + 1 :]
    return json.dumps(payload).encode()
