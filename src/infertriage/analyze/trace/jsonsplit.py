"""analyze, level 1: stream the `traceEvents` array of a large JSON trace in bounded memory.

Takes a binary file object (plain or gzip); gives the document's other
top-level keys (`header`) and, lazily, the events in batches of Python dicts.
Each chunk read is cut after its last `},` and parsed by orjson; a prefix of
array elements that parses must end on an element boundary, so success
proves the cut. When it fails (the cut fell inside an event, or the array
closes in this chunk) numpy finds the exact cut: the commas at the top level
of the array, outside strings, escaped quotes handled. Only one chunk of the
file is ever held as Python objects.

Cost is linear in the file's size whatever its shape: the exact scan carries
its state (inside a string or not, after a backslash or not, the depth) from
one chunk to the next, so no byte is scanned twice, and drops whitespace
outside strings as it goes, so a file padded with hundreds of megabytes of
blanks holds no more memory than one without. One event longer than
`MAX_EVENT_BYTES` (blanks outside strings not counted) is refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import BinaryIO, TypeVar

import numpy as np
import orjson

__all__ = [
    "CHUNK_BYTES",
    "MAX_EVENT_BYTES",
    "NotATrace",
    "TruncatedTrace",
    "iter_decoded_batches",
    "iter_event_batches",
]

CHUNK_BYTES = 1024 * 1024  # peak memory grows ~20× the chunk: keep it small
MAX_EVENT_BYTES = 32 * 1024 * 1024  # a profiler's events are well under a kilobyte
_FAST_PENDING_CHUNKS = 4  # the orjson cut is tried while so little is pending (its cost)
_MAX_HEAD_BYTES = 64 * 1024 * 1024  # the keys before traceEvents: device properties and the like
_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BLANKS = b" \t\r\n"

_STRUCTURAL = np.zeros(256, dtype=np.bool_)
for _char in b'{}[]",\\':
    _STRUCTURAL[_char] = True
_WHITESPACE = np.zeros(256, dtype=np.bool_)
for _char in _BLANKS:
    _WHITESPACE[_char] = True
_QUOTE, _BACKSLASH, _COMMA = ord('"'), ord("\\"), ord(",")
_DEPTH = np.zeros(256, dtype=np.int8)
_DEPTH[ord("{")] = _DEPTH[ord("[")] = 1
_DEPTH[ord("}")] = _DEPTH[ord("]")] = -1
T = TypeVar("T")
Decode = Callable[[bytearray], T]  # the bytes of `[events…]` to a batch; orjson's errors


class NotATrace(ValueError):
    """The bytes are JSON (or not), but not a Chrome trace: the message says what was found."""


class TruncatedTrace(ValueError):
    """The file ends before the traceEvents array closes."""


def _unescaped(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """Positions and bytes of the structural bytes that no backslash escapes (backslashes
    dropped), and whether the last byte is a backslash that escapes the next chunk's first."""
    pos = np.flatnonzero(_STRUCTURAL[data])
    ch = data[pos]
    slash = ch == _BACKSLASH
    if not slash.any():
        return pos, ch, False
    # A backslash run of odd length escapes the byte after it; drop escaped quotes.
    where = pos[slash]
    starts = np.r_[True, where[1:] != where[:-1] + 1]
    run_len = np.diff(np.r_[np.flatnonzero(starts), len(where)])
    escaped = (where[starts] + run_len)[run_len % 2 == 1]
    keep = ~slash & ~np.isin(pos, escaped)
    carry = bool(len(escaped)) and int(escaped[-1]) == len(data)
    return pos[keep], ch[keep], carry


class _Scanner:
    """The exact cut, found by one pass over each byte of the pending buffer.

    `pending[:scanned]` is scanned: its blanks outside strings dropped, its last
    top-level comma (`comma`) and the array's closing `]` (`close`) found, and the
    state at its end kept (in a string, escaped, depth below the array).
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Fresh state at an element boundary: the start of `pending`."""
        self.scanned = 0
        self.in_string = False
        self.escaped = False
        self.depth = 0
        self.comma = -1
        self.close = -1

    def consumed(self, count: int) -> None:
        """`pending[:count]` was parsed and dropped; `count` ends on the last top-level comma."""
        self.scanned -= count
        self.comma = -1

    def scan(self, pending: bytearray, compact: bool) -> None:
        """Scan `pending[scanned:]`; `close` is set when the array closes there.

        Blanks outside strings are dropped from a stretch without a string in it
        (cheap: padding), and from any stretch when `compact` (one event is growing)."""
        if self.escaped and self.scanned < len(pending):  # an escaped byte is no structure
            self.scanned += 1
            self.escaped = False
        begin = self.scanned
        if begin >= len(pending):
            return
        region = bytes(pending[begin:])
        if not self.in_string and b'"' not in region:  # no string here: every blank goes
            compacted = region.translate(None, _BLANKS)
            if len(compacted) < len(region):
                pending[begin:] = region = compacted
        data = np.frombuffer(region, dtype=np.uint8)
        pos, ch, carry = _unescaped(data)
        quote = ch == _QUOTE
        parity = (np.cumsum(quote, dtype=np.int64) + int(self.in_string)) & 1
        outside = (parity == 0) & ~quote
        kept = self._kept(data, pos[quote]) if compact else None
        if kept is not None:  # positions in the compacted bytes
            pos = np.cumsum(kept, dtype=np.int64)[pos] - 1
            pending[begin:] = data[kept].tobytes()
        pos, ch = pos[outside], ch[outside]
        depth = self.depth + np.cumsum(_DEPTH[ch], dtype=np.int64)
        below = np.flatnonzero(depth < 0)
        if len(below):
            self.close = begin + int(pos[below[0]])
            return
        commas = np.flatnonzero((ch == _COMMA) & (depth == 0))
        if len(commas):
            self.comma = begin + int(pos[commas[-1]])
        self.in_string = bool((int(quote.sum()) + int(self.in_string)) & 1)
        self.depth = int(depth[-1]) if len(depth) else self.depth
        self.escaped = carry
        self.scanned = len(pending)

    def _kept(self, data: np.ndarray, quotes: np.ndarray) -> np.ndarray | None:
        """Which bytes to keep: all but the blanks outside strings (None: keep all)."""
        if self.in_string and not len(quotes):  # all of it inside one string
            return None
        blank = _WHITESPACE[data]
        if not blank.any():
            return None
        toggles = np.zeros(len(data), dtype=np.int8)
        toggles[quotes] = 1
        inside = (np.cumsum(toggles, dtype=np.int64) + int(self.in_string)) & 1
        drop = blank & (inside == 0)
        return ~drop if drop.any() else None


def _loads(batch: bytearray) -> list[object]:
    events: list[object] = orjson.loads(batch)
    return events


def _bracketed(pending: bytearray, end: int) -> bytearray:
    """`[` + pending[:end] + `]`, copied once."""
    batch = bytearray(b"[")
    with memoryview(pending) as view, view[:end] as part:
        batch += part
    batch += b"]"
    return batch


def _parse_batch(pending: bytearray, end: int, decode: Decode[T]) -> T:
    batch = _bracketed(pending, end)
    try:
        return decode(batch)
    except orjson.JSONDecodeError as err:
        raise NotATrace(f"its traceEvents array is not valid JSON ({err})") from err


def _fast_batch(pending: bytearray, decode: Decode[T]) -> tuple[T | None, int]:
    """Cut after the last `},` and parse: if that parses, the cut was at the top level.

    A prefix of array elements that parses as `[...]` must end on an element
    boundary (balanced, outside strings), so a successful parse proves the cut
    right; on failure the caller does the exact scan.
    """
    brace = pending.rfind(b"},")
    if brace < 0:
        return None, -1
    batch = _bracketed(pending, brace + 1)
    try:
        events = decode(batch)
    except orjson.JSONDecodeError:
        return None, -1
    return events, brace + 1


def _read_head(stream: BinaryIO) -> tuple[dict[str, object], bytes]:
    """The top-level keys before `traceEvents` and the bytes just after its `[`.

    Leading blanks are skipped a chunk at a time; each read doubles what is held,
    so the key is searched for over a total of at most twice the head's size."""
    head = b""
    while not head:
        more = stream.read(CHUNK_BYTES)
        if not more:
            raise NotATrace("it is empty")
        head = more.lstrip(_BLANKS)
    if head.startswith(b"["):  # a bare array of events is a Chrome trace too
        return {}, head[1:]
    if not head.startswith(b"{"):
        raise NotATrace("it is not JSON")
    while (match := _KEY.search(head)) is None:
        if len(head) > _MAX_HEAD_BYTES:
            raise NotATrace(f"it has no traceEvents array in its first {_MAX_HEAD_BYTES >> 20} MiB")
        more = stream.read(max(CHUNK_BYTES, len(head)))
        if not more:
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
    rest = bytearray(b'{"traceEvents":[]')
    rest += tail
    while len(rest) < _MAX_HEAD_BYTES:
        more = stream.read(CHUNK_BYTES)
        if not more:
            break
        rest += more
    try:
        keys = orjson.loads(rest)
    except orjson.JSONDecodeError:
        return {}
    return keys if isinstance(keys, dict) else {}


def iter_event_batches(stream: BinaryIO, header: dict[str, object]) -> Iterator[list[object]]:
    """Yield the events of `stream` in batches; fills `header` with the other top-level keys.

    Raises `NotATrace` when the bytes are not a trace (or hold an event longer
    than `MAX_EVENT_BYTES`) and `TruncatedTrace` when the file ends inside the
    array. Exceptions of the stream itself (a corrupt gzip) pass through.
    """
    return iter_decoded_batches(stream, header, _loads)


def iter_decoded_batches(
    stream: BinaryIO, header: dict[str, object], decode: Decode[T], chunk_bytes: int | None = None
) -> Iterator[T]:
    """`iter_event_batches` with each batch's bytes (`[…]`) given to `decode`, read
    `chunk_bytes` (default `CHUNK_BYTES`) at a time; `decode` raises orjson's error for
    bytes that are not JSON."""
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    head, buf = _read_head(stream)
    header.update(head)
    pending = bytearray(buf)
    scanner = _Scanner()
    while scanner.close < 0 and (more := stream.read(chunk_bytes)):
        pending += more
        backlog = len(pending) > _FAST_PENDING_CHUNKS * chunk_bytes
        if not backlog:
            events, end = _fast_batch(pending, decode)
            if events is not None:
                yield events
                del pending[: end + 1]
                scanner.reset()
                continue
        scanner.scan(pending, compact=backlog)
        if scanner.comma >= 0 and scanner.close < 0:
            end = scanner.comma
            yield _parse_batch(pending, end, decode)
            del pending[: end + 1]
            scanner.consumed(end + 1)
        elif len(pending) > MAX_EVENT_BYTES:
            raise NotATrace(f"one of its events is longer than {MAX_EVENT_BYTES >> 20} MiB")
    scanner.scan(pending, compact=False)
    if scanner.close < 0:
        raise TruncatedTrace("it ends before its traceEvents array closes")
    end = scanner.close
    yield _parse_batch(pending, end, decode)
    tail = bytes(pending[end + 1 :])
    header.update({k: v for k, v in _read_tail(tail, stream).items() if k not in header})
