"""analyze, level 1: load an Nsight Systems SQLite export into `TraceTable`s.

Takes a `.sqlite` file written by `nsys export --type sqlite`; gives one
`TraceTable` per profiled process (`globalPid`). Reads
`CUPTI_ACTIVITY_KIND_KERNEL`, `…_RUNTIME`, `…_MEMCPY`, `…_MEMSET`,
`NVTX_EVENTS`, `StringIds` and `TARGET_INFO_GPU`; kernels are joined to
runtime calls on `correlationId` within a process. Columns are probed with
`PRAGMA table_info`, because the export schema differs between Nsight
versions (2.9 names the runtime function in `nameId` or `name`, 3.x adds
columns); an absent optional column reads as a default.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from infertriage.analyze.trace.table import (
    CopyKind,
    GpuOpKind,
    RangeKind,
    TableBuilder,
    TraceTable,
)
from infertriage.schemas.errors import UserError
from infertriage.schemas.inputs import clip

__all__ = ["NSYS_REP_HINT", "load_nsys"]

NSYS_REP_HINT = "nsys export --type sqlite --output {stem}.sqlite {path}"
_KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
_RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
_MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
_MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
_NVTX = "NVTX_EVENTS"
_TID_BITS = 0xFFFFFF  # globalTid = globalPid | tid in the low 24 bits
# ENUM_CUDA_MEMCPY_OPER → our CopyKind; ENUM_CUDA_MEM_KIND 0 is pageable host memory.
_COPY_KINDS = {1: CopyKind.HTOD, 2: CopyKind.DTOH, 8: CopyKind.DTOD, 9: CopyKind.HTOH}
_COPY_KINDS |= {10: CopyKind.PTOP, 11: CopyKind.HTOD, 12: CopyKind.DTOH, 13: CopyKind.DTOD}
_COPY_LABELS = {
    CopyKind.HTOD: "HtoD",
    CopyKind.DTOH: "DtoH",
    CopyKind.DTOD: "DtoD",
    CopyKind.HTOH: "HtoH",
    CopyKind.PTOP: "PtoP",
    CopyKind.UNKNOWN: "unknown",
}
_PAGEABLE = 0
_NVTX_RANGES = (59, 60)  # NvtxPushPopRange, NvtxStartEndRange


class _NotAnExport(Exception):
    """An SQLite database without the tables of an Nsight Systems export."""


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}


def _pick(columns: set[str], *choices: str, default: str = "NULL") -> str:
    return next((c for c in choices if c in columns), default)


def _rows(db: sqlite3.Connection, sql: str) -> list[tuple[Any, ...]]:
    return db.execute(sql).fetchall()


def _array(rows: list[tuple[Any, ...]], index: int, fill: int = -1) -> npt.NDArray[np.int64]:
    return np.fromiter(
        (fill if row[index] is None else row[index] for row in rows),
        dtype=np.int64,
        count=len(rows),
    )


class _Strings:
    """StringIds ids → ids in each process's own string table."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.values: dict[int, str] = dict(_rows(db, "SELECT id, value FROM StringIds"))

    def text(self, string_id: object) -> str:
        if isinstance(string_id, str):
            return string_id
        if isinstance(string_id, int) and string_id in self.values:
            return str(self.values[string_id])
        return f"<string {string_id}>"


def _kernels(db: sqlite3.Connection, tables: set[str]) -> list[tuple[Any, ...]]:
    cols = _columns(db, _KERNEL)
    name = _pick(cols, "demangledName", "shortName", "name", "mangledName")
    pid = _pick(cols, "globalPid", default="0")
    sql = (
        f"SELECT start, end, deviceId, streamId, {_pick(cols, 'correlationId')}, {name}, {pid} "
        f"FROM {_KERNEL}"
    )
    return _rows(db, sql) if _KERNEL in tables else []


def _copies(db: sqlite3.Connection, table: str, tables: set[str]) -> list[tuple[Any, ...]]:
    if table not in tables:
        return []
    cols = _columns(db, table)
    kind = _pick(cols, "copyKind", default="0")
    src, dst = _pick(cols, "srcKind"), _pick(cols, "dstKind")
    pid = _pick(cols, "globalPid", default="0")
    sql = (
        f"SELECT start, end, deviceId, streamId, {_pick(cols, 'correlationId')}, "
        f"{_pick(cols, 'bytes', default='0')}, {kind}, {src}, {dst}, {pid} FROM {table}"
    )
    return _rows(db, sql)


def _runtime(db: sqlite3.Connection, tables: set[str]) -> list[tuple[Any, ...]]:
    if _RUNTIME not in tables:
        return []
    cols = _columns(db, _RUNTIME)
    name = _pick(cols, "nameId", "name")
    tid = _pick(cols, "globalTid", default="0")
    return _rows(
        db, f"SELECT start, end, {tid}, {_pick(cols, 'correlationId')}, {name} FROM {_RUNTIME}"
    )


def _nvtx(db: sqlite3.Connection, tables: set[str]) -> list[tuple[Any, ...]]:
    if _NVTX not in tables:
        return []
    cols = _columns(db, _NVTX)
    text = "text" if "text" in cols else "NULL"
    text_id = _pick(cols, "textId")
    tid = _pick(cols, "globalTid", default="0")
    types = ", ".join(str(t) for t in _NVTX_RANGES)
    sql = (
        f"SELECT start, end, COALESCE({text}, {text_id}), {tid} FROM {_NVTX} "
        f"WHERE end IS NOT NULL AND eventType IN ({types})"
    )
    return _rows(db, sql)


def _device_names(db: sqlite3.Connection, tables: set[str]) -> dict[int, str]:
    if "TARGET_INFO_GPU" not in tables:
        return {}
    cols = _columns(db, "TARGET_INFO_GPU")
    ident = _pick(cols, "id", "cuDevice")
    return {
        int(i): str(n)
        for i, n in _rows(db, f"SELECT {ident}, name FROM TARGET_INFO_GPU")
        if i is not None
    }


def _process(value: int | None) -> int:
    return 0 if value is None else int(value) & ~_TID_BITS


class _Export:
    """The rows of one export, grouped by process, turned into tables."""

    def __init__(self, db: sqlite3.Connection) -> None:
        tables = {row[0] for row in _rows(db, "SELECT name FROM sqlite_master WHERE type='table'")}
        if _KERNEL not in tables and _RUNTIME not in tables:
            raise _NotAnExport
        self.strings = _Strings(db)
        self.kernels = _kernels(db, tables)
        self.memcpy = _copies(db, _MEMCPY, tables)
        self.memset = _copies(db, _MEMSET, tables)
        self.runtime = _runtime(db, tables)
        self.nvtx = _nvtx(db, tables)
        self.device_names = _device_names(db, tables)

    def processes(self) -> list[int]:
        pids = {_process(r[6]) for r in self.kernels}
        pids |= {_process(r[9]) for r in (*self.memcpy, *self.memset)}
        return sorted(pids) or sorted({_process(r[2]) for r in self.runtime})

    def _add_gpu(self, builder: TableBuilder, pid: int) -> None:
        kernels = [r for r in self.kernels if _process(r[6]) == pid]
        names = [builder.strings.intern(self.strings.text(r[5])) for r in kernels]
        n = len(kernels)
        builder.gpu.append(
            start_ns=_array(kernels, 0),
            end_ns=_array(kernels, 1),
            kind=np.full(n, GpuOpKind.KERNEL),
            device=_array(kernels, 2),
            stream=_array(kernels, 3),
            correlation=_array(kernels, 4),
            name=names,
            num_bytes=np.zeros(n),
            copy_kind=np.zeros(n),
            pageable=np.zeros(n, dtype=np.bool_),
            occupancy=np.full(n, np.nan),
        )
        for rows, kind in ((self.memcpy, GpuOpKind.MEMCPY), (self.memset, GpuOpKind.MEMSET)):
            mine = [r for r in rows if _process(r[9]) == pid]
            self._add_copies(builder, mine, kind)

    @staticmethod
    def _add_copies(builder: TableBuilder, rows: list[tuple[Any, ...]], kind: GpuOpKind) -> None:
        copy_kinds, pageable, names = [], [], []
        for row in rows:
            copy = _COPY_KINDS.get(row[6], CopyKind.UNKNOWN) if kind == GpuOpKind.MEMCPY else 0
            host_side = row[7] if copy == CopyKind.HTOD else row[8]
            is_pageable = copy in (CopyKind.HTOD, CopyKind.DTOH) and host_side == _PAGEABLE
            copy_kinds.append(int(copy))
            pageable.append(is_pageable)
            label = (
                f"Memcpy {_COPY_LABELS[CopyKind(copy)]}" + (" (Pageable)" if is_pageable else "")
                if kind == GpuOpKind.MEMCPY
                else "Memset"
            )
            names.append(builder.strings.intern(label))
        builder.gpu.append(
            start_ns=_array(rows, 0),
            end_ns=_array(rows, 1),
            kind=np.full(len(rows), kind),
            device=_array(rows, 2),
            stream=_array(rows, 3),
            correlation=_array(rows, 4),
            name=names,
            num_bytes=_array(rows, 5, 0),
            copy_kind=copy_kinds,
            pageable=pageable,
            occupancy=np.full(len(rows), np.nan),
        )

    def table(self, path: Path, pid: int, rank: int) -> TraceTable:
        builder = TableBuilder()
        self._add_gpu(builder, pid)
        calls = [r for r in self.runtime if _process(r[2]) == pid]
        builder.runtime.append(
            start_ns=_array(calls, 0),
            end_ns=_array(calls, 1),
            tid=_array(calls, 2),
            correlation=_array(calls, 3),
            name=[builder.strings.intern(self.strings.text(r[4])) for r in calls],
        )
        ranges = [r for r in self.nvtx if _process(r[3]) == pid]
        builder.ranges.append(
            start_ns=_array(ranges, 0),
            end_ns=_array(ranges, 1),
            kind=np.full(len(ranges), RangeKind.NVTX),
            name=[builder.strings.intern(self.strings.text(r[2])) for r in ranges],
        )
        return builder.build(str(path), "nsys", rank, self.device_names)


def load_nsys(path: Path) -> list[TraceTable]:
    """One table per process of an Nsight Systems SQLite export; bad input is a `UserError`."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as err:
        raise UserError(f"{path} cannot be opened as SQLite ({err}).") from err
    try:
        export = _Export(db)
        return [export.table(path, pid, rank) for rank, pid in enumerate(export.processes())]
    except sqlite3.OperationalError as err:  # a table or column of the export is not there
        raise UserError(
            f"{path} is an SQLite database but not a whole Nsight Systems export "
            f"({clip(str(err))}); export the report again with `nsys export --type sqlite`."
        ) from err
    except sqlite3.DatabaseError as err:
        raise UserError(f"{path} is not an SQLite database ({clip(str(err))}).") from err
    except _NotAnExport as err:
        raise UserError(
            f"{path} is an SQLite database but not an Nsight Systems export "
            "(it has no CUPTI_ACTIVITY_KIND_KERNEL or _RUNTIME table); "
            "export a report with `nsys export --type sqlite`."
        ) from err
    except (TypeError, ValueError, OverflowError) as err:  # a time or an id that is no integer
        raise UserError(
            f"{path} holds a value that is not a 64-bit integer where Nsight Systems writes "
            f"one, a time or an id ({clip(str(err))})."
        ) from err
    finally:
        db.close()
