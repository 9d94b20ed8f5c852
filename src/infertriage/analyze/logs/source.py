"""analyze, level 1: one server log file as a stream of lines, read at a bounded cost.

Takes a path: plain text, or gzip when its name ends in `.gz` (every member,
zero padding allowed; a gzip cut short keeps what came before the cut, an
incident's last minutes are often there). Gives its lines one at a time,
decoded as UTF-8 (undecodable bytes replaced), and what the reading found on
the way: a cut, a last line without its newline, lines cut for length.

Bounds, so that no file costs more than a large real log:

- at most `MAX_LOG_BYTES` of log text (decompressed; the caller adds up the
  files it reads together). Told before a line is parsed: a plain file by
  its size, a gzip by a first pass that only decompresses (and stops at the
  bound, so a gzip bomb costs a fraction of a second). Past it the file is
  refused with one sentence that says how to cut it: a timeline of the first
  part only would miss the incident, which is most often near the end.
- a line longer than `MAX_LINE_BYTES` is cut there (a logged prompt, a dumped
  tensor): nothing the readers look for lies further in. The count is noted.

Memory holds one line at a time; what the caller keeps of each is its own.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from infertriage.schemas import UserError
from infertriage.schemas.inputs import GZIP_MAGIC, clip, open_gunzip, why_missing

__all__ = ["MAX_LINE_BYTES", "MAX_LOG_BYTES", "LogSource", "too_long"]

MAX_LOG_BYTES = 128 * 1024 * 1024  # of text; parsed, a megabyte of log takes ~5 MB of memory
MAX_LINE_BYTES = 64 * 1024
_GZIP_FAULTS = (EOFError, gzip.BadGzipFile, zlib.error)
_MEASURE_BYTES = 1024 * 1024


def too_long(how: str = "") -> str:
    """What to say of logs past `MAX_LOG_BYTES`, after "holds more than"."""
    return (
        f"{MAX_LOG_BYTES >> 20} MiB of log{how}, more than infertriage reads at once: cut "
        "out the hours around the incident first (e.g. `grep '12-02 14:' server.log > "
        "part.log`) and read that"
    )


class LogSource:
    """One log file, checked on construction (a `UserError` when it cannot be read whole);
    `lines()` streams it once, filling in `cut`, `last_line_open` and `num_long_lines`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.gzip = path.suffix == ".gz"
        self.cut: str | None = None  # why a gzip stopped early
        self.last_line_open = False  # the last line with text has no newline (a copy mid-write)
        self.num_lines = 0  # lines with text
        self.num_long_lines = 0  # lines cut at MAX_LINE_BYTES
        self.hole_bytes = 0  # NUL bytes before lines, left out (a `copytruncate` hole)
        if not path.exists():
            raise UserError(f"{path} {why_missing(path)}.")
        if not path.is_file():  # a folder; a FIFO, which would wait for a writer
            raise UserError(f"{path} is not a file.")
        try:
            with path.open("rb") as raw:
                self.size = self._measure(raw)  # bytes of text, counted to just past the bound
        except OSError as err:
            raise UserError(f"{path} cannot be read ({err.strerror}).") from err
        if self.size > MAX_LOG_BYTES:
            grown = " once decompressed" if self.gzip else ""
            raise UserError(f"{path} holds more than {too_long(grown)}.")

    def _measure(self, raw: BinaryIO) -> int:
        """The text's size in bytes, counted up to just past `MAX_LOG_BYTES`."""
        if not self.gzip:
            return self.path.stat().st_size
        if raw.read(2) != GZIP_MAGIC:
            raise UserError(f"{self.path} is not a gzip file (its name ends in .gz).")
        raw.seek(0)
        size = 0
        with open_gunzip(raw, str(self.path)) as stream:
            try:
                while size <= MAX_LOG_BYTES and (chunk := stream.read(_MEASURE_BYTES)):
                    size += len(chunk)
            except _GZIP_FAULTS:
                pass  # the cut is found again, and said, when the lines are read
        return size

    def lines(self) -> Iterator[str]:
        """The file's lines (with their line ends), in order."""
        try:
            with self.path.open("rb") as raw:
                if not self.gzip:
                    yield from self._decoded(raw)
                    return
                with open_gunzip(raw, str(self.path)) as stream:
                    try:
                        yield from self._decoded(stream)
                    except EOFError:
                        self.cut = "cut short before the end of its last member"
                    except (gzip.BadGzipFile, zlib.error) as err:
                        self.cut = f"corrupt: {clip(str(err))}"
        except OSError as err:
            raise UserError(f"{self.path} cannot be read ({err.strerror}).") from err

    def _decoded(self, stream: BinaryIO) -> Iterator[str]:
        for line in self._raw_lines(stream):
            if line.strip():
                self.num_lines += 1
                self.last_line_open = not line.endswith(b"\n")
            yield line.decode("utf-8", errors="replace")

    def _raw_lines(self, stream: BinaryIO) -> Iterator[bytes]:
        """Lines of at most `MAX_LINE_BYTES`; the rest of a longer one is skipped. A run of NUL
        bytes before a line is a hole, not part of it: a log truncated under a writer that
        goes on at its offset (logrotate's `copytruncate`) starts with as many NULs as it
        had bytes, and the first line after them is read whole."""
        while line := stream.readline(MAX_LINE_BYTES):
            if line.startswith(b"\x00"):
                size = len(line)
                line = line.lstrip(b"\x00")
                self.hole_bytes += size - len(line)
                if not line:
                    continue  # still in the hole
                if not line.endswith(b"\n"):  # the line goes on past this read
                    line += stream.readline(MAX_LINE_BYTES - len(line))
            if len(line) == MAX_LINE_BYTES and not line.endswith(b"\n"):
                self.num_long_lines += 1
                rest = line
                while rest and not rest.endswith(b"\n"):
                    rest = stream.readline(MAX_LINE_BYTES)
                line += rest[-1:]  # the newline that ended it, if one did
            yield line
