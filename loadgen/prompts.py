"""Request bodies: synthetic prompts of a target length, JSONL prompt files, the tier mix.

Synthetic prompts approximate one token per word: they are made of short, common lowercase
English words that BPE tokenizers of the Llama/Qwen/GPT families encode as a single token
each (a leading space included). The real count depends on the model's tokenizer and the chat
template adds a few tokens, so the server's `usage.prompt_tokens` is what gets recorded.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadgen.spec import SpecError, WorkloadSpec

# Short words that are one token in common BPE vocabularies.
_WORD_TEXT = (
    "the of and to in is it you that he was for on are as with his they at be this from "
    "have or by one had not but what all were when we there can an your which their said if "
    "do will each about how up out them then she many some so these would other into has "
    "more her two like him see time could no make than first been its who now people my made "
    "over did down only way find use may water long little very after words called just where "
    "most know get through back much go good new write our me man too any day same right look "
    "think also around another came come work three word must because does part even place "
    "well such here take why things help put years different away again off went old number"
)
WORDS = tuple(_WORD_TEXT.split())


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    index: int
    tier: str | None
    body: bytes
    max_tokens: int


@dataclass(frozen=True, slots=True)
class PromptRecord:
    prompt: str | None
    messages: list[dict[str, Any]] | None
    max_tokens: int | None
    tier: str | None


def load_prompts_file(path: str | Path) -> list[PromptRecord]:
    """Read a JSONL file: each line `{"prompt": str}` or `{"messages": [...]}` plus optional
    `max_tokens` and `tier`. Errors name the line."""
    records: list[PromptRecord] = []
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"prompts_file: cannot read {path}: {exc}") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SpecError(f"prompts_file line {number}: invalid JSON ({exc.msg})") from exc
        if not isinstance(item, dict):
            raise SpecError(f"prompts_file line {number}: expected an object")
        prompt, messages = item.get("prompt"), item.get("messages")
        if (prompt is None) == (messages is None):
            raise SpecError(f"prompts_file line {number}: give exactly one of prompt, messages")
        if prompt is not None and not isinstance(prompt, str):
            raise SpecError(f"prompts_file line {number}.prompt: must be a string")
        if messages is not None and not (
            isinstance(messages, list) and all(isinstance(m, dict) for m in messages)
        ):
            raise SpecError(f"prompts_file line {number}.messages: must be a list of objects")
        max_tokens = item.get("max_tokens")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise SpecError(f"prompts_file line {number}.max_tokens: must be an integer >= 1")
        tier = item.get("tier")
        if tier is not None and not isinstance(tier, str):
            raise SpecError(f"prompts_file line {number}.tier: must be a string")
        records.append(PromptRecord(prompt, messages, max_tokens, tier))
    if not records:
        raise SpecError("prompts_file: no prompts in the file")
    return records


def synthetic_prompt(rng: random.Random, tokens: int, prefix: str = "") -> str:
    """A prompt of about `tokens` tokens; `prefix` (already counted in `tokens`) leads it."""
    prefix_words = len(prefix.split()) if prefix else 0
    own = max(tokens - prefix_words, 0)
    words = rng.choices(WORDS, k=own)
    return f"{prefix} {' '.join(words)}".strip() if prefix else " ".join(words)


def salted(
    salt: str, prompt: str | None, messages: list[dict[str, Any]] | None
) -> tuple[str | None, list[dict[str, Any]] | None]:
    """The salt in front of the prompt, or of the first message's text: the very first tokens
    differ from another run's, so none of its prompts' blocks hash like this run's."""
    if messages:
        first, *rest = messages
        content = first.get("content")
        if isinstance(content, str):
            return prompt, [{**first, "content": f"{salt} {content}"}, *rest]
        return prompt, [{"role": "system", "content": salt}, *messages]
    return f"{salt} {prompt or ''}".rstrip(), messages


class RequestFactory:
    """Builds request `index`'s body. Deterministic for a given spec (seeded RNGs), provided
    requests are made in index order, which the runner does."""

    def __init__(self, spec: WorkloadSpec) -> None:
        self.spec = spec
        self._tier_rng = random.Random(f"tier:{spec.seed}")
        self._prompt_rng = random.Random(f"prompt:{spec.seed}")
        self._records = load_prompts_file(spec.prompts_file) if spec.prompts_file else None
        prefix_rng = random.Random(f"prefix:{spec.seed}")
        self._prefix = (
            " ".join(prefix_rng.choices(WORDS, k=spec.shared_prefix_tokens))
            if spec.shared_prefix_tokens
            else ""
        )
        self._tiers = list(spec.tier_mix)
        self._weights = [spec.tier_mix[t] for t in self._tiers]

    def _pick_tier(self) -> str | None:
        if not self._tiers:
            return None
        return self._tier_rng.choices(self._tiers, weights=self._weights, k=1)[0]

    def make(self, index: int) -> PlannedRequest:
        spec = self.spec
        tier = self._pick_tier()
        max_tokens = spec.max_tokens
        prompt: str | None = None
        messages: list[dict[str, Any]] | None = None
        if self._records is not None:
            record = self._records[index % len(self._records)]
            prompt, messages = record.prompt, record.messages
            max_tokens = record.max_tokens or max_tokens
            tier = record.tier or tier
        else:
            prompt = synthetic_prompt(self._prompt_rng, spec.prompt_tokens, self._prefix)
        if spec.salt:
            prompt, messages = salted(spec.salt, prompt, messages)
        body: dict[str, Any] = {"model": spec.model, "max_tokens": max_tokens}
        if spec.endpoint == "chat":
            body["messages"] = messages or [{"role": "user", "content": prompt}]
        else:
            if prompt is None:
                prompt = "\n".join(str(m.get("content", "")) for m in messages or [])
            body["prompt"] = prompt
        if spec.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if spec.temperature is not None:
            body["temperature"] = spec.temperature
        if tier is not None and tier in spec.tier_priority:
            body["priority"] = spec.tier_priority[tier]
        if spec.stream and tier is not None and tier in spec.tier_stream_interval:
            body["stream_interval"] = spec.tier_stream_interval[tier]
        return PlannedRequest(index, tier, json.dumps(body).encode(), max_tokens)
