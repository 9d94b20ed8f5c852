"""The SSE parser: framing variants, comments, multi-line data, splits at every byte."""

from __future__ import annotations

import pytest

from infertriage.loadgen.sse import SseEvent, SseParser


def _feed_all(pieces: list[bytes]) -> list[SseEvent]:
    parser = SseParser()
    out = []
    for piece in pieces:
        out += parser.feed(piece)
    return out + parser.close()


STREAMS = {
    "lf": b'data: {"a":1}\n\ndata: {"b":2}\n\ndata: [DONE]\n\n',
    "crlf": b'data: {"a":1}\r\n\r\ndata: {"b":2}\r\n\r\ndata: [DONE]\r\n\r\n',
    "cr": b'data: {"a":1}\r\rdata: {"b":2}\r\rdata: [DONE]\r\r',
    "comments": b': ping\n\ndata: {"a":1}\n\n:keep-alive\ndata: {"b":2}\n\ndata: [DONE]\n\n',
    "bom": b'\xef\xbb\xbfdata: {"a":1}\n\ndata: {"b":2}\n\ndata: [DONE]\n\n',
    "no_space": b'data:{"a":1}\n\ndata:{"b":2}\n\nid: 3\nretry: 10\ndata:[DONE]\n\n',
}
EXPECTED = [(b"", b'{"a":1}'), (b"", b'{"b":2}'), (b"", b"[DONE]")]


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_framings_give_the_same_events(name: str) -> None:
    stream = STREAMS[name]
    assert _feed_all([stream]) == EXPECTED


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_every_split_point_gives_the_same_events(name: str) -> None:
    stream = STREAMS[name]
    for cut in range(1, len(stream)):
        assert _feed_all([stream[:cut], stream[cut:]]) == EXPECTED, cut
    assert _feed_all([bytes([b]) for b in stream]) == EXPECTED


def test_multiline_data_and_named_events() -> None:
    stream = b"event: error\ndata: line one\ndata: line two\n\nevent: message\ndata: x\n\n"
    assert _feed_all([stream]) == [(b"error", b"line one\nline two"), (b"", b"x")]


def test_utf8_split_across_reads_is_joined_before_decoding() -> None:
    text = 'data: {"content":"café 日本"}\n\n'.encode()
    cut = text.index("é".encode()) + 1  # inside the two-byte é
    events = _feed_all([text[:cut], text[cut:]])
    assert events[0][1].decode() == '{"content":"café 日本"}'


def test_events_are_released_as_soon_as_complete() -> None:
    parser = SseParser()
    assert parser.feed(b"data: 1\n") == []
    assert parser.pending > 0
    assert parser.feed(b"\ndata: 2") == [(b"", b"1")]
    assert parser.close() == [(b"", b"2")]  # an unterminated last event still counts


def test_comment_only_and_empty_blocks_yield_nothing() -> None:
    assert _feed_all([b": a\n\n\n\n: b\n\n"]) == []
