"""Test helpers for the bounded-cost promises: large hostile files made cheaply, and a run of
Python in a process whose address space is capped.

`write_gzip` writes head, `count` copies of one block and tail as one gzip stream: a
megabyte block of blanks or of one log line repeated costs a few milliseconds a copy, so a
test can hand the tool hundreds of megabytes without holding them. `run_capped` runs a
snippet in a fresh interpreter under `RLIMIT_AS`: a reader that holds the input (or a
copy of it per chunk) dies of `MemoryError` there instead of passing.
"""

from __future__ import annotations

import subprocess
import sys
import zlib
from pathlib import Path

MIB = 1024 * 1024
GIB = 1024 * MIB


def write_gzip(path: Path, head: bytes, block: bytes, count: int, tail: bytes = b"") -> Path:
    packer = zlib.compressobj(1, zlib.DEFLATED, 31)
    with path.open("wb") as out:
        out.write(packer.compress(head))
        for _ in range(count):
            out.write(packer.compress(block))
        out.write(packer.compress(tail))
        out.write(packer.flush())
    return path


def run_capped(code: str, limit_bytes: int = GIB, timeout_s: float = 120.0) -> str:
    """Run `code` under an address-space cap; its stdout. A failure shows its stderr."""
    capped = (
        "import resource\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({limit_bytes}, {limit_bytes}))\n{code}"
    )
    done = subprocess.run(
        [sys.executable, "-c", capped],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
