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
