"""The body sent to the engine: the tier's `priority` written in, the client's never kept."""

from __future__ import annotations

import json

from gpu_agent.bodies import engine_body, read_completion


def test_the_tiers_priority_is_written_in_front_and_the_rest_kept_byte_for_byte() -> None:
    body = b'  {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": true}'
    completion = read_completion(body, chat=True)
    sent = engine_body(completion, body, 3)
    assert json.loads(sent) == {**json.loads(body), "priority": 3}
    assert sent.endswith(body.lstrip()[1:])  # no second serialisation of the client's JSON
    # Promoted later: the field is replaced, not duplicated.
    again = engine_body(completion, sent, 0)
    assert json.loads(again)["priority"] == 0 and again.count(b'"priority"') == 1


def test_a_clients_own_priority_is_replaced_or_removed() -> None:
    body = json.dumps({"model": "m", "prompt": "x", "priority": -100}).encode()
    replaced = engine_body(read_completion(body, chat=False), body, 2)
    assert json.loads(replaced) == {"model": "m", "prompt": "x", "priority": 2}
    assert replaced.count(b'"priority"') == 1
    removed = engine_body(read_completion(body, chat=False), body, None)
    assert json.loads(removed) == {"model": "m", "prompt": "x"}
    plain = json.dumps({"model": "m", "prompt": "x"}).encode()
    assert engine_body(read_completion(plain, chat=False), plain, None) is plain


def test_a_tiers_stream_interval_is_written_on_its_streams_and_a_larger_asked_one_kept() -> None:
    body = b'{"model": "m", "prompt": "x", "stream": true}'
    sent = engine_body(read_completion(body, chat=False), body, 1, 16)
    assert json.loads(sent) == {
        "model": "m",
        "prompt": "x",
        "stream": True,
        "priority": 1,
        "stream_interval": 16,
    }
    assert sent.endswith(body[1:])  # written in front, the client's bytes kept
    # Without priority (an fcfs engine) the interval is still written.
    alone = engine_body(read_completion(body, chat=False), body, None, 4)
    assert json.loads(alone)["stream_interval"] == 4 and "priority" not in json.loads(alone)
    # A client asking for less gets the tier's; one asking for more keeps its own; a bad
    # value (not an integer) is replaced rather than passed on for the engine to refuse.
    for asked, kept in ((2, 16), (64, 64), ("8", 16), (True, 16)):
        mine = json.dumps(
            {"model": "m", "prompt": "x", "stream": True, "stream_interval": asked}
        ).encode()
        out = json.loads(engine_body(read_completion(mine, chat=False), mine, None, 16))
        assert out["stream_interval"] == kept, asked
    # Not a stream: nothing to pace, the body goes as it came.
    whole = b'{"model": "m", "prompt": "x"}'
    assert engine_body(read_completion(whole, chat=False), whole, None, 16) is whole
    # Released later at another priority: one field each, the interval kept.
    completion = read_completion(body, chat=False)
    first = engine_body(completion, body, 2, 16)
    again = json.loads(engine_body(completion, first, 0))
    assert again["priority"] == 0 and again["stream_interval"] == 16
