"""analyze, level 1: stream the `traceEvents` array of a large JSON trace in bounded memory.

Takes a binary file object (plain or gzip); gives the document's other
top-level keys (`header`) and, lazily, the events in batches of Python dicts.
Each chunk read is cut after its last `},` and parsed by orjson; a prefix of
array elements that parses must end on an element boundary, so success
proves the cut. When it fails (the cut fell inside an event, or the array
closes in this chunk) numpy finds the exact cut: the commas at the top level
of the array, outside strings, escaped quotes handled. Only one chunk of the
file is ever held as Python objects.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np
import orjson

__all__ = ["CHUNK_BYTES", "NotATrace", "TruncatedTrace", "iter_event_batches"]

CHUNK_BYTES = 1024 * 1024  # peak memory grows ~20× the chunk: keep it small
_MAX_HEAD_BYTES = 64 * 1024 * 1024  # the keys before traceEvents: device properties and the like
_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')

_STRUCTURAL = np.zeros(256, dtype=np.bool_)
for _char in b'{}[]",\\':
    _STRUCTURAL[_char] = True
_QUOTE, _BACKSLASH, _COMMA = ord('"'), ord("\\"), ord(",")
_DEPTH = np.zeros(256, dtype=np.int8)
_DEPTH[ord("{")] = _DEPTH[ord("[")] = 1
_DEPTH[ord("}")] = _DEPTH[ord("]")] = -1


class NotATrace(ValueError):
    """The bytes are JSON (or not), but not a Chrome trace: the message says what was found."""


class TruncatedTrace(ValueError):
    """The file ends before the traceEvents array closes."""


def _structure(buf: bytes | bytearray) -> tuple[np.ndarray, np.ndarray]:
    """Positions and bytes of the brackets and commas outside strings."""
    data = np.frombuffer(buf, dtype=np.uint8)
    pos = np.flatnonzero(_STRUCTURAL[data])
    ch = data[pos]
    slash = ch == _BACKSLASH
    if slash.any():
        # A backslash run of odd length escapes the byte after it; drop escaped quotes.
        where = pos[slash]
        starts = np.r_[True, where[1:] != where[:-1] + 1]
        run_len = np.diff(np.r_[np.flatnonzero(starts), len(where)])
        escaped = (where[starts] + run_len)[run_len % 2 == 1]
        keep = ~slash & ~np.isin(pos, escaped)
        pos, ch = pos[keep], ch[keep]
    quote = ch == _QUOTE
    outside = (np.cumsum(quote, dtype=np.int32) & 1) == 0
    keep = outside & ~quote
    return pos[keep], ch[keep]


def _cut(buf: bytes | bytearray) -> tuple[int, bool]:
    """(end, closed): `buf[:end]` holds whole elements; closed when the array's `]` is at `end`.

    `buf` starts inside the array at element level. end is -1 when no
    element ends in it yet (the caller reads more).
    """
    pos, ch = _structure(buf)
    depth = np.cumsum(_DEPTH[ch], dtype=np.int32)
    below = np.flatnonzero(depth < 0)
    if len(below):
        return int(pos[below[0]]), True
    commas = np.flatnonzero((ch == _COMMA) & (depth == 0))
    if not len(commas):
        return -1, False
    return int(pos[commas[-1]]), False


def _parse_batch(pending: bytearray, end: int) -> list[object]:
    batch = bytearray(b"[")
    batch += pending[:end]
    batch += b"]"
    try:
        events = orjson.loads(batch)
    except orjson.JSONDecodeError as err:
        raise NotATrace(f"its traceEvents array is not valid JSON ({err})") from err
    return events  # type: ignore[no-any-return]


def _fast_batch(pending: bytearray) -> tuple[list[object] | None, int]:
    """Cut after the last `},` and parse: if that parses, the cut was at the top level.

    A prefix of array elements that parses as `[...]` must end on an element
    boundary (balanced, outside strings), so a successful parse proves the cut
    right; on failure the caller does the exact scan.
    """
    brace = pending.rfind(b"},")
    if brace < 0:
        return None, -1
    batch = bytearray(b"[")
    batch += pending[: brace + 1]
    batch += b"]"
    try:
        events = orjson.loads(batch)
    except orjson.JSONDecodeError:
        return None, -1
    return events, brace + 1


def _read_head(stream: BinaryIO) -> tuple[dict[str, object], bytes]:
    """The top-level keys before `traceEvents` and the bytes just after its `[`."""
    head = stream.read(CHUNK_BYTES)
    stripped = head.lstrip()
    if not stripped:
        raise NotATrace("it is empty")
    if stripped.startswith(b"["):  # a bare array of events is a Chrome trace too
        return {}, stripped[1:]
    if not stripped.startswith(b"{"):
        raise NotATrace("it is not JSON")
    while (match := _KEY.search(head)) is None:
        more = stream.read(CHUNK_BYTES)
        if not more or len(head) > _MAX_HEAD_BYTES:
            raise NotATrace("it has no traceEvents array")
        head += more
    prefix = head[: match.start()]
    try:
        header = orjson.loads(prefix + b'"traceEvents":[]}')
    except orjson.JSONDecodeError as err:
        raise NotATrace("the JSON before its traceEvents array is malformed") from err
    if not isinstance(header, dict):
        raise NotATrace("it is not a JSON object")
    header.pop("traceEvents", None)
    return header, head[match.end() :]


def _read_tail(tail: bytes, stream: BinaryIO) -> dict[str, object]:
    """The keys after the array (e.g. `distributedInfo` in some exporters), if small enough."""
    while len(tail) < _MAX_HEAD_BYTES:
        more = stream.read(CHUNK_BYTES)
        if not more:
            break
        tail += more
    try:
        rest = orjson.loads(b'{"traceEvents":[]' + tail)
    except orjson.JSONDecodeError:
        return {}
    return rest if isinstance(rest, dict) else {}


def iter_event_batches(stream: BinaryIO, header: dict[str, object]) -> Iterator[list[object]]:
    """Yield the events of `stream` in batches; fills `header` with the other top-level keys.

    Raises `NotATrace` when the bytes are not a trace and `TruncatedTrace`
    when the file ends inside the array. Exceptions of the stream itself
    (a corrupt gzip) pass through.
    """
    head, buf = _read_head(stream)
    header.update(head)
    pending = bytearray(buf)
    while more := stream.read(CHUNK_BYTES):
        pending += more
        events, end = _fast_batch(pending)
        if events is None:
            end, closed = _cut(pending)
            if closed:
                break
            events = _parse_batch(pending, end) if end >= 0 else []
        yield events
        del pending[: end + 1]
    end, closed = _cut(pending)
    if not closed:
        raise TruncatedTrace("it ends before its traceEvents array closes")
    yield _parse_batch(pending, end)
    tail = bytes(pending[end + 1 :])
    header.update({k: v for k, v in _read_tail(tail, stream).items() if k not in header})
