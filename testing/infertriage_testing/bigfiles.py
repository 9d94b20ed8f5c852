"""testing: large files made cheaply, for the bounded-cost tests and benchmarks.

`write_gzip` writes head, `count` copies of one block and tail as one gzip stream: a
megabyte block of blanks or of one log line repeated costs milliseconds a copy, so a
test can hand the tool hundreds of megabytes (a gzip bomb, a padded trace) without
holding them.
"""

from __future__ import annotations

import zlib
from pathlib import Path

__all__ = ["write_gzip"]


def write_gzip(
    path: Path, head: bytes, block: bytes, count: int, tail: bytes = b"", *, level: int = 1
) -> Path:
    """`level` 1 writes fastest; 9 gives the smallest file (a bomb's usual shape)."""
    packer = zlib.compressobj(level, zlib.DEFLATED, 31)
    with path.open("wb") as out:
        out.write(packer.compress(head))
        for _ in range(count):
            out.write(packer.compress(block))
        out.write(packer.compress(tail))
        out.write(packer.flush())
    return path
