"""loadgen, level 2: an incremental server-sent-events parser on bytes.

Takes the body of a streaming response in whatever pieces the socket gives;
gives `(event, data)` pairs, both bytes, as soon as each event is complete.
Framing is byte-level, so a UTF-8 character split across two reads is simply
joined before anything decodes it. Handles `\\n\\n`, `\\r\\n\\r\\n` and bare
`\\r` line ends (a `\\r` at the end of a read waits for a possible `\\n`),
comment lines (`:` keep-alives), multi-line `data:` (joined with `\\n`),
`event:` names (`b""` for the default `message`), and ignores `id:` and
`retry:`. The common read — exactly one `data: {...}\\n\\n` — takes a fast
path of a few byte scans and one slice.
"""

from __future__ import annotations

__all__ = ["SseEvent", "SseParser"]

SseEvent = tuple[bytes, bytes]  # (event name, data)

_COLON = 0x3A
_BOM = b"\xef\xbb\xbf"


def _parse_block(block: bytes, out: list[SseEvent]) -> None:
    """One event block (lines, no blank line) → at most one event."""
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

    __slots__ = ("_buf", "_started")

    def __init__(self) -> None:
        self._buf = b""
        self._started = False

    def feed(self, data: bytes) -> list[SseEvent]:
        if (
            not self._buf
            and data.startswith(b"data: ")
            and data.endswith(b"\n\n")
            and data.count(b"\n") == 2
            and b"\r" not in data
        ):
            # The common read: exactly one whole single-line event (JSON holds no raw newline).
            self._started = True
            return [(b"", data[6:-2])]
        buf = self._buf + data if self._buf else data
        if not self._started:
            if len(buf) < len(_BOM) and _BOM.startswith(buf):
                self._buf = buf  # perhaps the start of a byte-order mark: wait for more
                return []
            self._started = True
            if buf.startswith(_BOM):
                buf = buf[3:]
        hold = b""
        if b"\r" in buf:
            if buf.endswith(b"\r"):
                buf, hold = buf[:-1], b"\r"
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        blocks = buf.split(b"\n\n")
        self._buf = blocks.pop() + hold
        out: list[SseEvent] = []
        for block in blocks:
            if block:
                _parse_block(block.lstrip(b"\n"), out)
        return out

    def close(self) -> list[SseEvent]:
        """End of stream: an event that lacked its blank line still counts."""
        rest, self._buf = self._buf.replace(b"\r", b"\n").strip(b"\n"), b""
        out: list[SseEvent] = []
        if rest:
            _parse_block(rest, out)
        return out

    @property
    def pending(self) -> int:
        """Bytes held for an incomplete event."""
        return len(self._buf)
