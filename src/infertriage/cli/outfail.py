"""cli, level 6: a write that fails — a full disk, a closed or full standard output.

Takes the `OSError` a command ended on (or the one typer turned into a silent exit 1:
a broken pipe) and gives the one sentence `main` prints on stderr before exit 2.
What was written before stays: JSONL records are flushed one by one and run.json
is replaced whole (`schemas.rundir`), so the run directory holds every record up to
the failed one. Standard output, when it is the one that failed (`| head`,
`> /dev/full`), is pointed at /dev/null first, so that the interpreter's last flush
does not fail again with a traceback of its own. Imports nothing heavy:
`cli/__init__` uses it, when `--help` cannot be written, before the app loads.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys

__all__ = ["WRITE_ERRNOS", "flush_stdout", "pipe_error", "write_failure"]

# a full disk, a quota, a file-size limit (RLIMIT_FSIZE), a closed reader, a closed fd
WRITE_ERRNOS = frozenset(
    {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG, errno.EPIPE, errno.EBADF}
)


def pipe_error(exc: BaseException | None) -> OSError | None:
    """The broken pipe behind typer's `SystemExit(1)`, if that is what it was."""
    if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
        return exc
    return None


def flush_stdout() -> str | None:
    """Flush standard output now, inside `main`'s handling rather than at the interpreter's
    exit; the sentence to print when it fails."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except OSError as err:
        return write_failure(err, stdout=True)
    return None


def write_failure(err: OSError, *, stdout: bool = False) -> str:
    """The sentence for a failed write: to a file, or (`stdout`, or found so) to standard
    output, which is then pointed at /dev/null."""
    why = err.strerror or os.strerror(err.errno or 0)
    if err.filename is not None and not stdout:
        return f"cannot write {err.filename} ({why}); what was written before it is kept."
    if stdout or err.errno == errno.EPIPE or _stdout_refuses():
        _silence_stdout()
        return f"cannot write to standard output ({why}); what was written to files is kept."
    return f"a write failed ({why}); what was written before it is kept."


def _stdout_refuses() -> bool:
    """Does standard output refuse even an empty write (/dev/full, a read-only fd)? A file
    on a full disk takes one, so there the sentence cannot say which write it was."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = sys.stdout.fileno()
        try:
            os.write(fd, b"")
        except OSError:
            return True
    return False


def _silence_stdout() -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
