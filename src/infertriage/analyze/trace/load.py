"""analyze, level 1: turn the paths a user gives into `TraceTable`s, one per rank.

Takes files and directories: PyTorch-profiler traces (`.json`, `.json.gz`,
also `.pt.trace.json[.gz]`), a directory of per-rank traces, or Nsight
Systems SQLite exports; gives the tables in rank order. The format is told by
the file's first bytes, not its name. Anything else is a `UserError` of one
sentence: a missing or empty file, an `.nsys-rep` report (with the export
command), a file in neither format.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from infertriage.analyze.trace.chrome import load_chrome
from infertriage.analyze.trace.nsys import NSYS_REP_HINT, load_nsys
from infertriage.analyze.trace.table import TraceTable
from infertriage.schemas.errors import UserError
from infertriage.schemas.inputs import GZIP_MAGIC, why_missing

__all__ = ["load_traces"]

_SQLITE_MAGIC = b"SQLite format 3\x00"
_SNIFF_BYTES = 64 * 1024
_BLANKS = b" \t\r\n"
_REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
_TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite")


def _files_in(directory: Path) -> list[Path]:
    files = sorted(
        p for p in directory.iterdir() if p.is_file() and p.name.endswith(_TRACE_SUFFIXES)
    )
    if not files:
        raise UserError(
            f"{directory} holds no trace (*.json, *.json.gz or an nsys *.sqlite export)."
        )
    return files


def _sniff(path: Path) -> str:
    if path.name.endswith(_REPORT_SUFFIXES):
        command = NSYS_REP_HINT.format(stem=path.name.rsplit(".", 1)[0], path=path)
        raise UserError(
            f"{path} is an Nsight Systems report; export it to SQLite first with `{command}`."
        )
    if not path.is_file():  # a FIFO would wait for a writer, a device never end
        raise UserError(f"{path} is not a regular file.")
    try:
        with path.open("rb") as stream:
            head = stream.read(len(_SQLITE_MAGIC))
            first = head.lstrip(_BLANKS)
            while head and not first:  # leading blanks, a chunk at a time
                more = stream.read(_SNIFF_BYTES)
                if not more:
                    break
                first = more.lstrip(_BLANKS)
    except OSError as err:
        raise UserError(f"{path} cannot be read ({err.strerror}).") from err
    if not head:
        raise UserError(f"{path} is empty.")
    if head.startswith(_SQLITE_MAGIC):
        return "nsys"
    if head.startswith(GZIP_MAGIC) or first[:1] in (b"{", b"["):
        return "pytorch"
    if not first:
        raise UserError(f"{path} holds nothing but blanks.")
    raise UserError(
        f"{path} is neither a PyTorch-profiler trace (JSON) nor an Nsight Systems SQLite export."
    )


def _expand(paths: Sequence[Path]) -> list[Path]:
    if not paths:
        raise UserError("no trace given: pass trace files or a directory of per-rank traces.")
    files: list[Path] = []
    for path in paths:
        if not path.exists():
            raise UserError(f"{path} {why_missing(path)}.")
        files.extend(_files_in(path) if path.is_dir() else [path])
    return files


def _release_freed_heap() -> None:
    """Hand the heap a load freed back to the OS (glibc's `malloc_trim`; nothing elsewhere).

    A load interleaves its column chunks with each batch's short-lived arrays, so glibc
    keeps tens of megabytes of freed heap that the analyses' own peak would stack on."""
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the process's own symbols: libc's, on glibc
    except (OSError, AttributeError):
        return
    trim(0)


def load_traces(paths: Sequence[Path]) -> list[TraceTable]:
    """Load every trace; tables come back sorted by rank (file order breaks ties)."""
    tables: list[TraceTable] = []
    for index, path in enumerate(_expand(paths)):
        if _sniff(path) == "nsys":
            tables.extend(load_nsys(path))
        else:
            tables.append(load_chrome(path, default_rank=index))
    _release_freed_heap()
    ranks = [t.rank for t in tables]
    if len(set(ranks)) != len(ranks):  # two files claim one rank: number them in order
        tables = [replace(t, rank=i) for i, t in enumerate(tables)]
    tables.sort(key=lambda t: t.rank)
    if not any(len(t.gpu) for t in tables):
        names = ", ".join(sorted({Path(t.path).name for t in tables} or {p.name for p in paths}))
        raise UserError(
            f"{names}: no GPU kernel, memcpy or memset in the trace; profile with "
            "ProfilerActivity.CUDA (or nsys --trace=cuda)."
        )
    return tables
