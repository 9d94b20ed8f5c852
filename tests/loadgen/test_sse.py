"""The SSE parser: framing variants, comments, multi-line data, splits at every byte."""

from __future__ import annotations

import pytest

from infertriage.loadgen.sse import MAX_EVENT_BYTES, SseEvent, SseEventTooLarge, SseParser


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


def test_a_bare_cr_blank_line_dispatches_at_once() -> None:
    parser = SseParser()
    assert parser.feed(b"data: 1\r\r") == [(b"", b"1")]  # not held for a possible \n
    assert parser.feed(b"data: 2\r") == []
    assert parser.feed(b"\r") == [(b"", b"2")]
    # The \n that opens the next read pairs with the \r that ended the last: no blank line.
    assert parser.feed(b"\ndata: 3\r\n") == []
    assert parser.feed(b"\r\n") == [(b"", b"3")]
    assert parser.pending == 0 and parser.close() == []


# (data line, its line end, the blank line's end): every mix the spec allows.
MIXED = [
    (b"data: a", b"\r", b"\r"),
    (b"data: b", b"\r\n", b"\r\n"),
    (b"data: c", b"\n", b"\n"),
    (b"data: d", b"\r\n", b"\r"),
    (b"data: e", b"\n", b"\r\n"),
    (b"data: f", b"\r", b"\r\n"),
    (b"data: g", b"\n", b"\r"),
]


def _mixed() -> tuple[bytes, list[int]]:
    """The stream, and for each event the offset at which its blank line is complete."""
    stream, done_at = b"", []
    for line, end, blank in MIXED:
        stream += line + end + blank
        done_at.append(len(stream) - len(blank) + 1)  # a blank line ends at its first byte
    return stream, done_at


def test_mixed_line_ends_dispatch_each_event_in_the_read_that_completes_it() -> None:
    stream, done_at = _mixed()
    expected = [(b"", line[6:]) for line, _, _ in MIXED]
    for cut in range(len(stream) + 1):
        parser = SseParser()
        first = parser.feed(stream[:cut])
        assert first == [e for e, at in zip(expected, done_at, strict=True) if at <= cut], cut
        assert first + parser.feed(stream[cut:]) + parser.close() == expected, cut
    assert _feed_all([bytes([b]) for b in stream]) == expected


def test_a_long_event_in_many_reads_is_read_in_one_pass() -> None:
    # 16 MB in 2 KB reads: a parser that re-scanned what it holds on every read would
    # copy and scan terabytes here; this one scans each byte once and joins once.
    parser = SseParser(limit=32 << 20)
    body = b"x" * (16 << 20)
    event = b"data: " + body + b"\n\n"
    out = []
    for start in range(0, len(event), 2048):
        out += parser.feed(event[start : start + 2048])
    assert out == [(b"", body)] and parser.pending == 0


def test_an_event_past_the_limit_fails_as_soon_as_it_passes() -> None:
    parser = SseParser()
    fed = 0
    with pytest.raises(SseEventTooLarge, match="passed 4194304 bytes") as caught:
        while True:  # one endless event in 64 KiB reads
            piece = (b"data: " if not fed else b"") + b"y" * 65536
            parser.feed(piece)
            fed += len(piece)
    assert MAX_EVENT_BYTES < caught.value.num_bytes <= MAX_EVENT_BYTES + 65536 + 6
    assert parser.pending == 0  # what it held is let go


def test_a_whole_event_past_the_limit_in_one_read_fails_too() -> None:
    parser = SseParser(limit=1000)
    with pytest.raises(SseEventTooLarge):
        parser.feed(b"data: " + b"z" * 2000 + b"\n\n")
    with pytest.raises(SseEventTooLarge):
        SseParser(limit=1000).feed(b"data: 1\n\ndata: " + b"z" * 2000 + b"\n\ndata: 2\n\n")
    assert SseParser(limit=1000).feed(b"data: " + b"z" * 900 + b"\n\n") == [(b"", b"z" * 900)]


ALMOST_ONE_EVENT = [
    b"data: x\n\n",
    b"data: \n\n",
    b"data: x\n",
    b"data: x\n\n\n",
    b"data: a\nb\n\n",
    b"data: a\n\nb\n\n",
    b"data: x\r\n\r\n",
    b"data: x\n\r\n",
    b"data: x\r\n\n",
    b"data: x\rb\n\n",
    b"data: x\n\ndata: y\n\n",
    b"event: e\ndata: x\n\n",
    b"data:x\n\n",
]


@pytest.mark.parametrize("read", ALMOST_ONE_EVENT)
def test_a_read_like_one_whole_event_reads_as_it_does_byte_by_byte(read: bytes) -> None:
    # a single byte never takes the quick way for one whole event: the long way is the judge
    for before in ([], [b'data: {"a":1}\n\n'], [b'data: {"a":1}\r']):
        whole = _feed_all([*before, read, b"data: z\n\n"])
        one_by_one = _feed_all([*before, *(bytes([b]) for b in read), b"data: z\n\n"])
        assert whole == one_by_one, (before, read)
