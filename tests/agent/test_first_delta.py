"""The scheduler's first-token signal (relay.FirstDelta): the first non-empty delta of any kind,
found in raw SSE reads however the events are split across them."""

from __future__ import annotations

import json

import pytest

from gpu_agent.relay import FirstDelta

HEAD = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m"}


def event(delta: dict[str, object] | None = None, **choice: object) -> bytes:
    body = {**HEAD, "choices": [{"index": 0, **({"delta": delta} if delta is not None else {})}]}
    body["choices"][0].update(choice)  # type: ignore[index]
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


ROLE = event({"role": "assistant", "content": ""})
NOT_TOKENS = [
    ROLE,
    event({"content": None}),
    event({"content": None, "tool_calls": []}),
    event({"reasoning_content": None, "content": ""}),
    event({"reasoning": ""}),
    event(text=""),
    b'data: {"id":"x","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":0}}\n\n',
    b": keep-alive comment\n\n",
]
# Each token event, and its bytes up to the first token's first byte (a value's first
# character; the `{` of a tool call list's first element).
TOKENS = {
    "content": (event({"content": "Hel"}), b'"content":"H'),
    "text": (event(text="once"), b'"text":"o'),
    "reasoning_content": (event({"reasoning_content": "Let me think"}), b'"reasoning_content":"L'),
    "reasoning": (event({"reasoning": "Hmm"}), b'"reasoning":"H'),
    "tool_calls": (
        event(
            {
                "content": None,
                "tool_calls": [
                    {"index": 0, "id": "c1", "type": "function", "function": {"name": "f"}}
                ],
            }
        ),
        b'"tool_calls":[{',
    ),
    "spaced": (b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n', b'"content": "x'),
    "escaped": (event({"content": '"quoted"'}), b'"content":"\\'),
}


def first_read_seen(reads: list[bytes]) -> int | None:
    detector = FirstDelta()
    for index, read in enumerate(reads):
        if detector.seen(read):
            return index
    return None


@pytest.mark.parametrize("kind", sorted(TOKENS))
def test_the_first_token_of_any_kind_is_seen_in_the_read_that_completes_it(kind: str) -> None:
    token, marker = TOKENS[kind]
    stream = b"".join(NOT_TOKENS) + token + event({"content": "more"})
    # The read that brings the token's first byte is the one that signals it.
    first_byte = len(b"".join(NOT_TOKENS)) + token.index(marker) + len(marker) - 1
    for cut in range(1, len(stream)):
        found = first_read_seen([stream[:cut], stream[cut:]])
        assert found == (0 if cut > first_byte else 1), cut


def test_a_token_split_over_many_small_reads_is_seen() -> None:
    stream = ROLE + TOKENS["reasoning_content"][0]
    reads = [stream[i : i + 3] for i in range(0, len(stream), 3)]
    found = first_read_seen(reads)
    assert found is not None and found * 3 >= len(ROLE)


def test_deltas_without_a_token_are_never_taken_for_one() -> None:
    stream = b"".join(NOT_TOKENS)
    for cut in range(1, len(stream)):
        assert first_read_seen([stream[:cut], stream[cut:]]) is None, cut
    assert first_read_seen([stream[i : i + 1] for i in range(len(stream))]) is None
