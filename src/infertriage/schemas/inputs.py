"""schemas, level 0: what a user hands us, read at a bounded cost.

Takes a small file a user wrote or saved (an SLO file, a scenario, a model config, a
tool's output), a file that may be gzip (a trace, a log), or a value to quote in an
error sentence; gives its bytes or text, its YAML document, a stream of its
decompressed bytes, or a quote of bounded length.

- A YAML file is at most `MAX_YAML_BYTES`, nests at most `MAX_YAML_DEPTH`
  levels and holds no anchor or alias: our files never need them, and a few
  hundred bytes of aliases ("billion laughs") expand to gigabytes.
- A gzip stream is refused once it has given more than `MAX_GZIP_RATIO` times
  the file's size and more than `GZIP_RATIO_FROM_BYTES` (a gzip bomb: a
  megabyte that expands to gigabytes). Real traces and logs expand 5- to
  50-fold.
- A quoted value is at most `MAX_QUOTED_CHARS` characters, cut with an ellipsis.

Every refusal is a `UserError` of one sentence naming the file.
"""

from __future__ import annotations

import errno
import functools
import io
import os
import reprlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from infertriage.schemas.errors import UserError

if TYPE_CHECKING:
    import yaml

# PyYAML (its loader subclassed here) and gzip load on first use: every command imports
# this module, few read a YAML file or a gzip stream

__all__ = [
    "GZIP_MAGIC",
    "GZIP_RATIO_FROM_BYTES",
    "MAX_GZIP_RATIO",
    "MAX_QUOTED_CHARS",
    "MAX_SENTENCE_CHARS",
    "MAX_YAML_BYTES",
    "MAX_YAML_DEPTH",
    "clip",
    "load_yaml",
    "open_gunzip",
    "quoted",
    "read_small_bytes",
    "read_small_text",
    "why_missing",
]

MAX_QUOTED_CHARS = 120  # of a value quoted in an error sentence
MAX_SENTENCE_CHARS = 1000  # of a whole sentence passed on, that may quote several values
MAX_YAML_BYTES = 256 * 1024  # our SLO and scenario files are a few KiB
MAX_YAML_DEPTH = 32  # mappings and lists inside one another
GZIP_MAGIC = b"\x1f\x8b"
MAX_GZIP_RATIO = 100  # decompressed bytes per byte of the file, past GZIP_RATIO_FROM_BYTES
GZIP_RATIO_FROM_BYTES = 256 * 1024 * 1024
_STREAM_BUFFER_BYTES = 1024 * 1024
_NOT_OURS = "infertriage's own files take a few KiB, so it is likely the wrong file."

_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = MAX_QUOTED_CHARS
_MAX_INT_BITS = 4 * MAX_QUOTED_CHARS  # repr of a longer int costs (and may be refused)


def quoted(value: object, limit: int = MAX_QUOTED_CHARS) -> str:
    """`repr(value)` for an error sentence: at most `limit` characters, an ellipsis if cut.

    Bounded in cost too: a string is cut before it is escaped, a list or mapping is
    shown to three levels and six items, a huge integer by its size."""
    if isinstance(value, str):
        text = repr(value[:limit]) if len(value) > limit else repr(value)
    elif isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
        text = f"<an integer of {value.bit_length()} bits>"
    else:
        text = _REPR.repr(value)
    return clip(text, limit)


def _size(num_bytes: int) -> str:
    return f"{num_bytes >> 20} MiB" if num_bytes >= 1 << 20 else f"{num_bytes >> 10} KiB"


def why_missing(path: Path) -> str:
    """What to say of an input path that cannot be reached (`exists()` is False), after its
    name: "does not exist", or where a symbolic link is there, why it leads nowhere."""
    try:
        path.stat()
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "is a symbolic link loop: it cannot be resolved"
        if path.is_symlink():
            return f"is a symbolic link to {quoted(os.readlink(path))}, which does not exist"
    return "does not exist"


def read_small_bytes(
    path: Path, name: str, max_bytes: int = MAX_YAML_BYTES, why: str = _NOT_OURS
) -> bytes:
    """The bytes of a small regular file; `name` ("SLO file x.yaml") opens each error
    sentence, `why` says why a larger file is refused.

    Reads at most `max_bytes` + 1 bytes, so a huge file (or one that grows) costs no more;
    a folder, a FIFO (opening it would wait for a writer) or a device (/dev/zero never
    ends) is refused unread."""
    if not path.is_file():
        said = "is not a regular file" if path.exists() else why_missing(path)
        raise UserError(f"{name} {said}.")
    try:
        with path.open("rb") as stream:
            data = stream.read(max_bytes + 1)
    except OSError as err:
        raise UserError(f"cannot read {name} ({err.strerror}).") from err
    if len(data) > max_bytes:
        raise UserError(f"{name} is larger than {_size(max_bytes)}; {why}")
    return data


def read_small_text(
    path: Path, name: str, max_bytes: int = MAX_YAML_BYTES, why: str = _NOT_OURS
) -> str:
    """The UTF-8 text of a small file (`read_small_bytes`, a BOM dropped); `name` ("SLO
    file x.yaml") opens each error sentence."""
    data = read_small_bytes(path, name, max_bytes, why)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise UserError(f"cannot read {name}: it is not a text file (UTF-8).") from err


def clip(text: str, limit: int = MAX_QUOTED_CHARS) -> str:
    """`text` (a message that may quote user input) cut to `limit` characters with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


_NO_ALIASES = "; infertriage's files never need one: write each value out"


class _Refused(Exception):
    """A bound of this module broken: `sentence` follows the file's name."""

    def __init__(self, what: str, event: yaml.Event, advice: str = "") -> None:
        super().__init__(what)
        mark = event.start_mark
        where = f" at line {mark.line + 1}" if mark is not None else ""
        self.sentence = f"{what}{where}{advice}"


@functools.cache
def _bounded_loader() -> type[yaml.SafeLoader]:
    """PyYAML's safe loader without anchors and aliases, and with a depth bound."""
    import yaml  # noqa: PLC0415  # see the imports

    class _BoundedLoader(yaml.SafeLoader):
        def __init__(self, text: str) -> None:
            super().__init__(text)
            self._depth = 0

        def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
            event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                raise _Refused("uses a YAML anchor or alias", event, _NO_ALIASES)
            if self._depth >= MAX_YAML_DEPTH:
                raise _Refused(f"nests deeper than {MAX_YAML_DEPTH} levels", event)
            self._depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    return _BoundedLoader


def load_yaml(text: str, name: str) -> object:
    """The YAML (or JSON) document in `text`; None when it holds only comments.

    A `UserError` of one sentence, naming `name` and the line, when it is not valid
    YAML or breaks a bound of this module."""
    if len(text) > MAX_YAML_BYTES:
        raise UserError(f"{name} is larger than {MAX_YAML_BYTES // 1024} KiB; {_NOT_OURS}")
    import yaml  # noqa: PLC0415  # see the imports

    loader: yaml.SafeLoader | None = None
    try:
        loader = _bounded_loader()(text)  # its reader refuses control characters (NUL) at once
        return loader.get_single_data()
    except _Refused as err:
        raise UserError(f"{name} {err.sentence}.") from err
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None)
        said = f" ({clip(problem)})" if isinstance(problem, str) else ""
        raise UserError(f"{name} is not valid YAML{where}{said}.") from err
    except (ValueError, OverflowError) as err:  # an integer of more than 4300 digits
        raise UserError(f"{name} holds a value YAML cannot read ({clip(str(err))}).") from err
    finally:
        if loader is not None:
            loader.dispose()


class _GuardedGzip(io.RawIOBase):
    """A gzip member stream that refuses to expand past the bomb bound."""

    def __init__(self, raw: BinaryIO, name: str, limit: int) -> None:
        super().__init__()
        import gzip  # noqa: PLC0415  # see the imports

        self._unzipped = gzip.GzipFile(fileobj=raw, mode="rb")
        self._name = name
        self._limit = limit
        self._given = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        # read1: one read of the file at most, so what came before a cut is given first
        data = self._unzipped.read1(len(buffer))
        count = len(data)
        buffer[:count] = data
        self._given += count
        if self._given > self._limit:
            raise UserError(
                f"{self._name} expands more than {MAX_GZIP_RATIO}-fold, past "
                f"{GZIP_RATIO_FROM_BYTES >> 20} MiB, when decompressed: a gzip bomb, or a file "
                "padded out; it was not read further."
            )
        return count

    def close(self) -> None:
        self._unzipped.close()
        super().close()


@contextmanager
def open_gunzip(raw: BinaryIO, name: str) -> Iterator[BinaryIO]:
    """The decompressed bytes of the gzip file open in `raw` (every member, zero padding
    allowed), buffered, with the bomb bound; `name` opens the refusal's sentence.

    A gzip cut short raises `EOFError`, a corrupt one `gzip.BadGzipFile` or `zlib.error`,
    once the bytes before the fault have been read."""
    size = os.fstat(raw.fileno()).st_size
    limit = max(GZIP_RATIO_FROM_BYTES, MAX_GZIP_RATIO * size)
    with io.BufferedReader(_GuardedGzip(raw, name, limit), _STREAM_BUFFER_BYTES) as stream:
        yield stream
