"""The gateway's first-token signal in isolation: the old content-only regex against
relay.FirstDelta (any delta kind, reads split anywhere), per stream, side by side.

    .venv/bin/python lab/bench_first_delta.py [--repeat 7]

A stream here is the reads aiohttp hands the gateway until the first token: the role chunk,
then the first token chunk (content, reasoning or a tool call). The gateway stops looking
once it has seen the first token, so this is the detector's whole cost per stream. The old
regex never sees a reasoning or tool-call token: it scans every read of such a stream, which
the "old, whole stream" line prices for a 64-token answer.
"""

from __future__ import annotations

import argparse
import json
import re
import timeit

from gpu_agent.relay import FirstDelta

OLD = re.compile(rb'"(?:content|text)":\s*"(?!")')
HEAD = {"id": "chatcmpl-tg1-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}


def event(delta: dict[str, object]) -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
    return b"data: " + json.dumps({**HEAD, "choices": [choice]}).encode() + b"\n\n"


ROLE = event({"role": "assistant", "content": ""})
FIRST = {
    "content": event({"content": "Hello"}),
    "reasoning": event({"reasoning_content": "Let me"}),
    "tool_calls": event(
        {
            "content": None,
            "tool_calls": [{"index": 0, "id": "c", "type": "function", "function": {"name": "f"}}],
        }
    ),
}


def new_stream(reads: list[bytes]) -> None:
    detector = FirstDelta()
    for read in reads:
        if detector.seen(read):
            return


def old_stream(reads: list[bytes]) -> None:
    for read in reads:
        if OLD.search(read):
            return


def per_stream_ns(fn: object, reads: list[bytes], repeat: int, number: int = 20000) -> float:
    best = min(timeit.repeat(lambda: fn(reads), number=number, repeat=repeat))  # type: ignore[operator]
    return best / number * 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    for kind, first in FIRST.items():
        reads = [ROLE, first]
        new = per_stream_ns(new_stream, reads, args.repeat)
        old = per_stream_ns(old_stream, reads, args.repeat)
        print(
            f"{kind:>10}: FirstDelta {new:6.0f} ns/stream, old regex {old:6.0f} ns/stream, "
            f"ratio {new / old:.2f}x"
        )
    whole = [ROLE] + [FIRST["reasoning"]] * 64
    old = per_stream_ns(old_stream, whole, args.repeat, number=2000)
    print(f"old regex on a whole 64-token reasoning stream (never matches): {old:6.0f} ns/stream")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
