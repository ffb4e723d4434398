"""What a simulated chat answer is made of, in vLLM's OpenAI shapes (pure, no I/O).

An answer may think first (`--sim-reasoning-tokens N`: its first N output tokens are
reasoning, sent as ``delta.reasoning_content``, or ``delta.reasoning`` with
``--sim-reasoning-field reasoning``, as vLLM does behind a ``--reasoning-parser``), and may be a
tool call rather than text: a request whose ``tool_choice`` is ``"required"`` or names a
function gets its answer as one call of that function (the first tool for ``"required"``), as
vLLM's guided tool choice gives it: the first delta carries the call's ``index``, ``id``,
``type`` and ``function.name``, later ones append to ``function.arguments``, which ends as the
JSON ``{"text": "<the answer's words>"}``; content is null and ``finish_reason`` is
``"tool_calls"``. ``usage.completion_tokens_details.reasoning_tokens`` counts the reasoning.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gpu_agent.sim.tokens import output_text

ARGUMENTS_OPEN = '{"text": "'
ARGUMENTS_CLOSE = '"}'


class ShapeError(ValueError):
    """A `tools` / `tool_choice` the simulator cannot honour; the message names the field."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class AnswerShape:
    reasoning_tokens: int = 0
    reasoning_field: str = "reasoning_content"
    tool_name: str | None = None
    tool_call_id: str = ""

    @property
    def plain(self) -> bool:
        return self.reasoning_tokens == 0 and self.tool_name is None

    def split(self, token_ids: list[int], emitted: int) -> tuple[list[int], list[int]]:
        """(reasoning ids, answer ids) of a delivery, `emitted` ids into the output."""
        thinking = max(0, min(len(token_ids), self.reasoning_tokens - emitted))
        return token_ids[:thinking], token_ids[thinking:]

    def reasoning_count(self, output_tokens: int) -> int:
        return min(self.reasoning_tokens, output_tokens)

    def deltas(self, token_ids: list[int], emitted: int, finished: bool) -> list[dict[str, Any]]:
        """The deltas of one delivery (one or two: a delivery may cross from reasoning to the
        answer), `emitted` ids into the output; `finished` when it is the last one."""
        thinking, answer = self.split(token_ids, emitted)
        out: list[dict[str, Any]] = []
        if thinking:
            out.append({self.reasoning_field: output_text(thinking, emitted == 0)})
        answered = max(0, emitted - self.reasoning_tokens)
        if answer or (finished and self.tool_name is not None and answered > 0):
            text = output_text(answer, answered == 0)
            if self.tool_name is None:
                out.append({"content": text})
            else:
                out.append({"content": None, "tool_calls": [self._call(text, answered, finished)]})
        return out or [{"content": ""}]

    def _call(self, text: str, answered: int, finished: bool) -> dict[str, Any]:
        if finished:
            text += ARGUMENTS_CLOSE
        if answered == 0:
            return {
                "index": 0,
                "id": self.tool_call_id,
                "type": "function",
                "function": {"name": self.tool_name, "arguments": ARGUMENTS_OPEN + text},
            }
        return {"index": 0, "function": {"arguments": text}}

    def finish_reason(self, reason: str) -> str:
        return "tool_calls" if self.tool_name is not None and reason == "stop" else reason

    def message(self, token_ids: list[int]) -> dict[str, Any]:
        """The whole answer as a non-streamed response's ``message``."""
        thinking, answer = self.split(token_ids, 0)
        message: dict[str, Any] = {"role": "assistant"}
        if self.reasoning_tokens:
            message[self.reasoning_field] = output_text(thinking, True)
        text = output_text(answer, True)
        if self.tool_name is None:
            message["content"] = text
            return message
        message["content"] = None
        arguments = ARGUMENTS_OPEN + text + ARGUMENTS_CLOSE
        message["tool_calls"] = [
            {
                "id": self.tool_call_id,
                "type": "function",
                "function": {"name": self.tool_name, "arguments": arguments},
            }
        ]
        return message

    def usage_details(self, output_tokens: int) -> dict[str, Any] | None:
        if not self.reasoning_tokens:
            return None
        return {"reasoning_tokens": self.reasoning_count(output_tokens)}


def _tool_names(tools: Any) -> list[str]:
    if not isinstance(tools, list) or not tools:
        raise ShapeError("'tools' must be a non-empty list when tool_choice needs a call", "tools")
    names = []
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise ShapeError(f"'tools[{index}].function.name' must be a string", f"tools[{index}]")
        names.append(name)
    return names


def tool_to_call(body: dict[str, Any]) -> str | None:
    """The function a request's `tool_choice` makes the answer call, or None (text)."""
    choice = body.get("tool_choice")
    if choice is None or choice in ("auto", "none"):
        return None  # the simulated model never decides to call a tool by itself
    if choice == "required":
        return _tool_names(body.get("tools"))[0]
    if isinstance(choice, dict) and choice.get("type") == "function":
        function = choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str) and name in _tool_names(body.get("tools")):
            return name
        raise ShapeError(
            f"'tool_choice.function.name' must name one of the tools, got {json.dumps(name)}",
            "tool_choice",
        )
    raise ShapeError(
        "'tool_choice' must be 'none', 'auto', 'required' or a named function", "tool_choice"
    )


def thinking_enabled(body: dict[str, Any]) -> bool:
    """vLLM's per-request switch for thinking models: chat_template_kwargs.enable_thinking."""
    kwargs = body.get("chat_template_kwargs")
    return not (isinstance(kwargs, dict) and kwargs.get("enable_thinking") is False)
