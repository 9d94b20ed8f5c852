"""loadgen, level 2: an incremental server-sent-events parser on bytes.

Takes the body of a streaming response in whatever pieces the socket gives;
gives `(event, data)` pairs, both bytes, as soon as each event is complete.
Framing is byte-level, so a UTF-8 character split across two reads is simply
joined before anything decodes it. Line ends are `\\n`, `\\r\\n` and a bare
`\\r`, mixed as the server likes: an event is dispatched at the blank line that
ends it (`\\n\\n`, `\\r\\r`, `\\r\\n\\r\\n`, …) in the read that completes it, and a
`\\r` at the end of a read is a line end at once (a `\\n` opening the next read
is then its pair, and skipped). Comment lines (`:` keep-alives), multi-line
`data:` (joined with `\\n`), `event:` names (`b""` for the default `message`);
`id:` and `retry:` are ignored. The common read — exactly one
`data: {...}\\n\\n` — takes a fast path of a few byte scans and one slice.

Linear in the bytes fed: each read is scanned once, and an event that spans
many reads is held as a list of pieces, joined once when it completes. One
event may hold at most `MAX_EVENT_BYTES`; past that `feed` raises
`SseEventTooLarge` (a `ValueError`), as soon as the bytes held pass it.
"""

from __future__ import annotations

__all__ = ["MAX_EVENT_BYTES", "SseEvent", "SseEventTooLarge", "SseParser"]

SseEvent = tuple[bytes, bytes]  # (event name, data)

# No token delta, usage or error event comes near this; an event past it is not one.
MAX_EVENT_BYTES = 4 << 20

_COLON = 0x3A
_CR = 0x0D
_LF = 0x0A
_BOM = b"\xef\xbb\xbf"


class SseEventTooLarge(ValueError):
    """One event passed the parser's limit before its blank line."""

    def __init__(self, num_bytes: int, limit: int) -> None:
        super().__init__(
            f"one server-sent event passed {limit} bytes ({num_bytes} held before its end): "
            "not a token delta; the request was given up"
        )
        self.num_bytes = num_bytes


def _parse_block(block: bytes, out: list[SseEvent]) -> None:
    """One event block (lines ended by `\\n`, no blank line) → at most one event."""
    if block.startswith(b"data: ") and b"\n" not in block:
        out.append((b"", block[6:]))
        return
    name = b""
    datas: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line[0] == _COLON:
            continue
        key, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if key == b"data":
            datas.append(value)
        elif key == b"event":
            name = value
    if datas:
        out.append((b"" if name == b"message" else name, b"\n".join(datas)))


class SseParser:
    """Feed bytes, get complete events; `close()` returns what a final unterminated event held."""

    __slots__ = ("_held", "_held_ends_lf", "_num_held", "_skip_lf", "_started", "limit")

    def __init__(self, limit: int = MAX_EVENT_BYTES) -> None:
        self.limit = limit
        self._held: list[bytes] = []  # the incomplete event's pieces, line ends made `\n`
        self._num_held = 0
        self._held_ends_lf = False
        self._skip_lf = False  # the last read ended in `\r`: a `\n` opening the next is its pair
        self._started = False

    def feed(self, data: bytes) -> list[SseEvent]:
        if (
            not self._held
            and data.startswith(b"data: ")
            and data.find(b"\n") == len(data) - 2
            and data[-1] == _LF
            and _CR not in data
            and len(data) <= self.limit
        ):
            # The common read: exactly one whole single-line event (JSON holds no raw newline):
            # its first line end is its last two bytes. (An int's `in` is a memchr; `count` and a
            # bytes `in` cost several times more, and this runs for every token.)
            self._started, self._skip_lf = True, False
            return [(b"", data[6:-2])]
        return self._feed(data)

    def _feed(self, data: bytes) -> list[SseEvent]:
        if self._skip_lf or not self._started or _CR in data:
            data = self._prepare(data)
            if not self._started:
                return []
        out: list[SseEvent] = []
        held, limit = self._held, self.limit
        if held:
            # Only the new bytes are searched for the held event's end.
            if self._held_ends_lf and data[:1] == b"\n":
                end, data = b"", data[1:]  # its blank line straddles the two reads
            else:
                cut = data.find(b"\n\n")
                if cut < 0:
                    self._hold(data)
                    return out
                end, data = data[:cut], data[cut + 2 :]
            block = (held[0] if len(held) == 1 else b"".join(held)) + end
            held.clear()
            self._num_held = 0
            if len(block) > limit:
                raise SseEventTooLarge(len(block), limit)
            block = block.lstrip(b"\n")
            if block:
                _parse_block(block, out)
        blocks = data.split(b"\n\n")
        rest = blocks.pop()
        for block in blocks:
            if len(block) > limit:
                raise SseEventTooLarge(len(block), limit)
            if block:
                _parse_block(block.lstrip(b"\n") if block[0] == _LF else block, out)
        if rest:
            self._hold(rest)
        return out

    def _prepare(self, data: bytes) -> bytes:
        """A read made plain: a `\n` pairing the last read's `\r` dropped, a byte-order mark
        at the stream's start dropped (perhaps split across reads), every line end `\n`."""
        if self._skip_lf:
            self._skip_lf = False
            if data[:1] == b"\n":
                data = data[1:]
        if not self._started:
            buf = b"".join(self._held) + data if self._held else data
            self._held.clear()
            self._num_held = 0
            if len(buf) < len(_BOM) and _BOM.startswith(buf):
                if buf:
                    self._held.append(buf)  # perhaps the start of a byte-order mark: wait
                    self._num_held = len(buf)
                return b""
            self._started = True
            data = buf[3:] if buf.startswith(_BOM) else buf
        if _CR in data:
            self._skip_lf = data[-1] == _CR
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        return data

    def _hold(self, piece: bytes) -> None:
        if not piece:
            return
        self._held.append(piece)
        self._num_held += len(piece)
        self._held_ends_lf = piece[-1] == _LF
        if self._num_held > self.limit:
            num_bytes = self._num_held
            self._held.clear()
            self._num_held = 0
            raise SseEventTooLarge(num_bytes, self.limit)

    def close(self) -> list[SseEvent]:
        """End of stream: an event that lacked its blank line still counts."""
        rest = b"".join(self._held).strip(b"\n")
        self._held.clear()
        self._num_held = 0
        out: list[SseEvent] = []
        if rest:
            _parse_block(rest, out)
        return out

    @property
    def pending(self) -> int:
        """Bytes held for an incomplete event."""
        return self._num_held
