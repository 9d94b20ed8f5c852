"""Test helpers for the bounded-cost promises: large hostile files made cheaply
(`infertriage_testing.bigfiles.write_gzip`), and a run of Python in a process whose address
space is capped.

`run_capped` runs a snippet in a fresh interpreter under `RLIMIT_AS`: a reader that holds
the input (or a copy of it per chunk) dies of `MemoryError` there instead of passing.
"""

from __future__ import annotations

import subprocess
import sys

from infertriage_testing.bigfiles import write_gzip

__all__ = ["GIB", "MIB", "run_capped", "write_gzip"]

MIB = 1024 * 1024
GIB = 1024 * MIB


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
