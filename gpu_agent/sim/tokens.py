"""The simulator's deterministic token approximation (no tokenizer, no model files).

- Counting: text is split on whitespace; each word costs ceil(len(word) / 4) tokens, i.e. about
  four characters per token as with English BPE tokenizers. Token ids are a CRC-32 of the word
  and the piece index, so equal text gives equal ids, which is what prefix caching hashes.
- Output: every generated token is one word of at most four characters from `VOCABULARY`,
  preceded by a space except the first, so counting the output text with the rule above gives
  back exactly the number of generated tokens.
- Chat prompts are rendered as ``<|role|>\\n{content}\\n`` per message, then counted, so the
  role markers cost a token each as a chat template's special tokens do.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

CHARS_PER_TOKEN = 4
VOCABULARY: tuple[str, ...] = (
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "on",
    "be",
    "by",
    "this",
    "are",
    "or",
    "from",
    "at",
    "an",
    "but",
    "not",
    "have",
    "has",
    "was",
    "can",
    "all",
    "each",
    "one",
    "two",
    "more",
    "some",
    "such",
    "when",
    "into",
    "than",
    "then",
    "them",
    "also",
    "may",
    "used",
    "data",
    "time",
    "node",
    "load",
    "fast",
    "slow",
    "test",
    "step",
    "key",
    "tier",
    "GPU",
    "KV",
    "page",
    "hit",
    "fit",
    "pool",
    "run",
    "mode",
    "rate",
    "good",
    "next",
    "last",
    "so",
)
# Output token ids live above every prompt id's range start so the two never need comparing.
OUTPUT_ID_BASE = 1 << 32


def count_tokens(text: str) -> int:
    """Number of tokens `text` costs under the approximation."""
    return sum(-(-len(word) // CHARS_PER_TOKEN) for word in text.split())


def encode(text: str) -> list[int]:
    """Deterministic token ids for `text`; ``len(encode(t)) == count_tokens(t)``."""
    ids: list[int] = []
    for word in text.split():
        raw = word.encode()
        crc = zlib.crc32(raw)
        pieces = -(-len(word) // CHARS_PER_TOKEN)
        if pieces == 1:
            ids.append(crc)
        else:
            ids.extend(zlib.crc32(raw, piece) for piece in range(pieces))
    return ids


def render_chat(messages: Iterable[tuple[str, str]]) -> str:
    """The text a chat prompt is counted as: role markers plus contents."""
    return "".join(f"<|{role}|>\n{content}\n" for role, content in messages)


def output_text(token_ids: Iterable[int], first: bool) -> str:
    """Text of generated ids; `first` says whether the first id starts the output."""
    words = [VOCABULARY[(token_id - OUTPUT_ID_BASE) % len(VOCABULARY)] for token_id in token_ids]
    text = " ".join(words)
    return text if first or not text else " " + text
