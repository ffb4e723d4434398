"""OpenAI request parsing and response shapes of the simulated engine (pure, no I/O)."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any

from gpu_agent.sim.answers import AnswerShape, ShapeError, thinking_enabled, tool_to_call
from gpu_agent.sim.config import SimConfig
from gpu_agent.sim.tokens import encode, output_text, render_chat


class ApiError(Exception):
    """An OpenAI-shaped error: {"error": {"message", "type", "param", "code"}}."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param

    def body(self) -> dict[str, Any]:
        kind = {400: "BadRequestError", 404: "NotFoundError"}.get(
            self.status, "InternalServerError"
        )
        return {
            "error": {
                "message": self.message,
                "type": kind,
                "param": self.param,
                "code": self.status,
            }
        }


@dataclass(frozen=True)
class CompletionParams:
    chat: bool
    model: str
    prompt_token_ids: list[int]
    max_tokens: int
    stream: bool
    include_usage: bool
    ignore_eos: bool
    priority: int
    temperature: float
    shape: AnswerShape = field(default_factory=AnswerShape)  # reasoning, tool calls (chat)
    stream_interval: int = 1  # vLLM's: a stream's tokens sent this many at a time


def _optional_int(body: dict[str, Any], name: str, minimum: int | None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"'{name}' must be an integer", name)
    if minimum is not None and value < minimum:
        raise ApiError(400, f"'{name}' must be at least {minimum}, got {value}", name)
    return value


def _optional_bool(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ApiError(400, f"'{name}' must be a boolean", name)
    return value


def _chat_prompt(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "'messages' must be a non-empty list", "messages")
    pairs: list[tuple[str, str]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ApiError(
                400, f"'messages[{index}]' must be an object with a 'role'", f"messages[{index}]"
            )
        content = message.get("content")
        if content is None:
            content = ""
        elif isinstance(content, list):
            parts = [part.get("text", "") for part in content if isinstance(part, dict)]
            content = " ".join(str(part) for part in parts)
        elif not isinstance(content, str):
            raise ApiError(
                400,
                f"'messages[{index}].content' must be a string or a list",
                f"messages[{index}].content",
            )
        pairs.append((message["role"], content))
    return render_chat(pairs)


def _completion_prompt(body: dict[str, Any]) -> list[int]:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return encode(prompt)
    if (
        isinstance(prompt, list)
        and prompt
        and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt)
    ):
        return list(prompt)  # already token ids
    raise ApiError(
        400, "'prompt' must be a string, a one-string list or a list of token ids", "prompt"
    )


def parse_completion(body: Any, config: SimConfig, chat: bool) -> CompletionParams:
    """Validate a /v1/chat/completions or /v1/completions body against the engine's limits."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str):
        raise ApiError(400, "'model' must be a string", "model")
    if model not in config.served_model_names:
        raise ApiError(404, f"The model `{model}` does not exist.", "model")
    prompt_ids = encode(_chat_prompt(body)) if chat else _completion_prompt(body)
    if not prompt_ids:
        raise ApiError(400, "the prompt is empty", "messages" if chat else "prompt")
    name = "max_tokens"
    max_tokens = _optional_int(body, "max_tokens", 1)
    if chat and body.get("max_completion_tokens") is not None:
        name = "max_completion_tokens"
        max_tokens = _optional_int(body, name, 1)
    room = config.max_model_len - len(prompt_ids)
    if room < 1 or (max_tokens is not None and max_tokens > room):
        requested = len(prompt_ids) + (max_tokens or 0)
        raise ApiError(
            400,
            f"This model's maximum context length is {config.max_model_len} tokens. However, "
            f"you requested {requested} tokens ({len(prompt_ids)} in the "
            f"{'messages' if chat else 'prompt'}, {max_tokens or 0} in the completion). "
            "Please reduce the length of the messages or completion.",
            name if room >= 1 else ("messages" if chat else "prompt"),
        )
    temperature = body.get("temperature", 1.0)
    if temperature is None:
        temperature = 1.0
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) or temperature < 0:
        raise ApiError(400, "'temperature' must be a non-negative number", "temperature")
    n = _optional_int(body, "n", None)
    if n not in (None, 1):
        raise ApiError(400, "'n' must be 1 in the simulator", "n")
    stream = _optional_bool(body, "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise ApiError(400, "'stream_options' must be an object", "stream_options")
    include_usage = bool(options and options.get("include_usage"))
    if include_usage and not stream:
        raise ApiError(
            400, "Stream options can only be defined when `stream=True`.", "stream_options"
        )
    shape = AnswerShape()
    if chat:
        try:
            tool = tool_to_call(body)
        except ShapeError as exc:
            raise ApiError(400, str(exc), exc.param) from exc
        thinking = config.reasoning_tokens if thinking_enabled(body) else 0
        if tool is not None or thinking:
            call_id = f"chatcmpl-tool-{zlib.crc32(json.dumps(body).encode()):08x}"
            shape = AnswerShape(thinking, config.reasoning_field, tool, call_id)
    return CompletionParams(
        chat=chat,
        model=model,
        prompt_token_ids=prompt_ids,
        max_tokens=max_tokens if max_tokens is not None else room,
        stream=stream,
        include_usage=include_usage,
        ignore_eos=_optional_bool(body, "ignore_eos"),
        priority=_optional_int(body, "priority", None) or 0,
        temperature=float(temperature),
        shape=shape,
        stream_interval=_optional_int(body, "stream_interval", 1) or 1,
    )


def usage(
    prompt_tokens: int, completion_tokens: int, shape: AnswerShape | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    details = shape.usage_details(completion_tokens) if shape is not None else None
    if details is not None:
        out["completion_tokens_details"] = details
    return out


def full_response(
    params: CompletionParams,
    response_id: str,
    created: int,
    token_ids: list[int],
    finish_reason: str,
    prompt_tokens: int,
    completion_tokens: int,
) -> dict[str, Any]:
    shape = params.shape
    if params.chat:
        choice: dict[str, Any] = {
            "index": 0,
            "message": shape.message(token_ids),
            "logprobs": None,
            "finish_reason": shape.finish_reason(finish_reason),
        }
        kind = "chat.completion"
    else:
        text = output_text(token_ids, True)
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        kind = "text_completion"
    return {
        "id": response_id,
        "object": kind,
        "created": created,
        "model": params.model,
        "choices": [choice],
        "usage": usage(prompt_tokens, completion_tokens, shape),
    }


class ChunkWriter:
    """SSE chunks of one streamed response, in OpenAI's shapes."""

    def __init__(self, params: CompletionParams, response_id: str, created: int) -> None:
        self.params = params
        self.head = {
            "id": response_id,
            "object": "chat.completion.chunk" if params.chat else "text_completion",
            "created": created,
            "model": params.model,
        }
        # Token chunks are the hot path (256 streams x every step): the JSON around the text
        # is rendered once per stream, only the text is encoded per token.
        head = json.dumps(self.head, separators=(",", ":"))[:-1]
        opening = '{"index":0,"delta":{"content":' if params.chat else '{"index":0,"text":'
        closing = "}," if params.chat else ","
        self._token_prefix = f'data: {head},"choices":[{opening}'
        self._token_suffix = f'{closing}"logprobs":null,"finish_reason":null}}]}}\n\n'
        self._emitted = 0  # output tokens sent so far

    def _event(self, payload: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"

    def role(self) -> bytes:
        choice = {
            "index": 0,
            "delta": {"role": "assistant", "content": ""},
            "logprobs": None,
            "finish_reason": None,
        }
        return self._event({**self.head, "choices": [choice]})

    def tokens(self, token_ids: list[int], finish_reason: str | None) -> bytes:
        """The chunk(s) of one delivery of output tokens."""
        emitted, shape = self._emitted, self.params.shape
        self._emitted += len(token_ids)
        if shape.plain:
            return self.token(output_text(token_ids, emitted == 0), finish_reason)
        deltas = shape.deltas(token_ids, emitted, finish_reason is not None)
        events = []
        for index, delta in enumerate(deltas):
            last = index == len(deltas) - 1
            reason = shape.finish_reason(finish_reason) if last and finish_reason else None
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
            events.append(self._event({**self.head, "choices": [choice]}))
        return b"".join(events)

    def token(self, text: str, finish_reason: str | None) -> bytes:
        if finish_reason is None:
            return (self._token_prefix + json.dumps(text) + self._token_suffix).encode()
        if self.params.chat:
            choice: dict[str, Any] = {"index": 0, "delta": {"content": text}}
        else:
            choice = {"index": 0, "text": text}
        choice["logprobs"] = None
        choice["finish_reason"] = finish_reason
        return self._event({**self.head, "choices": [choice]})

    def usage(self, prompt_tokens: int, completion_tokens: int) -> bytes:
        totals = usage(prompt_tokens, completion_tokens, self.params.shape)
        return self._event({**self.head, "choices": [], "usage": totals})

    @staticmethod
    def done() -> bytes:
        return b"data: [DONE]\n\n"
