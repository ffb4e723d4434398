"""The SSE decoder on tricky byte streams."""

from __future__ import annotations

from loadgen.sse import SSEDecoder, SSEEvent


def feed_all(pieces: list[bytes]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for piece in pieces:
        events.extend(decoder.feed(piece))
    return events


STREAM = (
    b": keep-alive comment\n"
    b'data: {"a": 1}\n\n'
    b'event: error\ndata: {"error": {"message": "boom"}}\n\n'
    b"data: line one\ndata: line two\n\n"
    b"id: 7\ndata:no-space\n\n"
    b"data: [DONE]\n\n"
)
EXPECTED = [
    SSEEvent('{"a": 1}'),
    SSEEvent('{"error": {"message": "boom"}}', event="error"),
    SSEEvent("line one\nline two"),
    SSEEvent("no-space", id="7"),
    SSEEvent("[DONE]", id="7"),
]


def test_whole_stream_in_one_read_gives_every_event_in_order() -> None:
    assert feed_all([STREAM]) == EXPECTED


def test_a_stream_fed_byte_by_byte_gives_the_same_events() -> None:
    assert feed_all([STREAM[i : i + 1] for i in range(len(STREAM))]) == EXPECTED


def test_crlf_and_bare_cr_line_endings_are_equivalent_to_lf() -> None:
    crlf = STREAM.replace(b"\n", b"\r\n")
    cr = STREAM.replace(b"\n", b"\r")
    assert feed_all([crlf]) == EXPECTED
    assert feed_all([cr]) == EXPECTED
    # CRLF split between two reads must not count as two line ends (an empty line would
    # dispatch early).
    assert feed_all([b"data: a\r", b"\ndata: b\r\n\r\n"]) == [SSEEvent("a\nb")]
    assert feed_all([crlf[i : i + 1] for i in range(len(crlf))]) == EXPECTED


def test_events_are_only_dispatched_by_the_blank_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: partial") == []
    assert decoder.has_partial()
    assert decoder.feed(b" still\n") == []
    assert decoder.feed(b"\n") == [SSEEvent("partial still")]
    assert not decoder.has_partial()


def test_utf8_character_split_across_reads_is_kept_whole() -> None:
    raw = 'data: {"c": "温度"}\n\n'.encode()
    cut = raw.index("度".encode()) + 1
    assert feed_all([raw[:cut], raw[cut:]]) == [SSEEvent('{"c": "温度"}')]


def test_comments_retry_unknown_fields_and_no_data_line_dispatch_nothing() -> None:
    assert feed_all([b":x\n\nretry: 100\n\nfoo: bar\n\nevent: ping\n\nid: 3\n\n"]) == []


def test_a_bare_data_line_dispatches_an_event_with_empty_data() -> None:
    # WHATWG: `data:` appends "" and an LF, so the buffer is "\n", not empty; the trailing LF
    # is removed at dispatch and the event's data is "".
    assert feed_all([b"data:\n\n"]) == [SSEEvent("")]
    assert feed_all([b"data\n\n"]) == [SSEEvent("")]  # a field name alone: empty value
    assert feed_all([b"event: ping\ndata:\n\n"]) == [SSEEvent("", event="ping")]
    assert feed_all([b"data:\r\n", b"\r\n"]) == [SSEEvent("")]
    assert feed_all([b"data:\ndata:\n\n"]) == [SSEEvent("\n")]  # two empty lines, one LF


def test_event_type_resets_after_each_event() -> None:
    events = feed_all([b"event: error\ndata: 1\n\ndata: 2\n\n"])
    assert [e.event for e in events] == ["error", "message"]


def test_the_client_takes_an_empty_event_as_carrying_nothing() -> None:
    from loadgen.client import _StreamState

    state = _StreamState(chat=True)
    for event in feed_all([b"data:\n\n", b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n']):
        state.on_event(event.data, event.event, 1.0)
    assert state.error is None and state.times == [1.0]
