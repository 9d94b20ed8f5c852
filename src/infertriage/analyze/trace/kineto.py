"""analyze, level 1: decode a batch of Kineto events natively, straight into table columns.

Takes the bytes of a batch of `traceEvents` (a JSON array, cut by
`jsonsplit`); gives a `Batch` whose events msgspec decoded into a typed
struct naming only the fields the table keeps (phase, category, name,
start, duration, process, thread, and five `args`), every other field
skipped in C, and `ingest`, which turns such a batch into column chunks of
a `TableBuilder` with numpy and C-level maps: no Python code runs per
event. What does not fit the types (a string where a number belongs, an
event without a start, a non-object) is left to the generic reader: the
batch is then parsed again by orjson, whose errors and results are the
reference (`chrome`), so both readers give the same table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, is_, itemgetter, ne
from typing import Any, Literal

import msgspec
import numpy as np
import numpy.typing as npt
import orjson
from msgspec import UNSET, UnsetType
from msgspec.structs import astuple

from infertriage.analyze.trace.events import (
    CPU_CATS,
    GPU_CATS,
    MAX_US,
    OCCUPANCY,
    RANGE_INITIALS,
    RUNTIME_CATS,
    column,
    copy_kind,
    range_kind,
)
from infertriage.analyze.trace.table import GpuOpKind, TableBuilder

__all__ = ["Batch", "Irregular", "Reader", "decode", "decode_generic"]


class _Args(msgspec.Struct, frozen=True, gc=False):
    """A string where a number belongs (ROCm's runtime calls write `"bytes": "1"`) is read as
    the generic reader reads it (`events.column`)."""

    device: int | str | UnsetType = UNSET  # absent: the event's pid
    stream: int | str = -1
    correlation: int | str = -1
    bytes: int | str = 0
    occupancy: float | str = msgspec.field(default=math.nan, name=OCCUPANCY)


_NO_ARGS = _Args()


# Chrome's trace event phases: a literal is decoded without a new string each time.
_Phase = Literal[
    "B", "E", "X", "i", "I", "C", "b", "n", "e", "S", "T", "p", "F", "s", "t", "f", "P", "N", "O",
    "D", "M", "V", "v", "R", "c", "(", ")", "",
]  # fmt: skip


class _Event(msgspec.Struct, frozen=True, gc=False):
    """The fields kept, in this order (`astuple`); a JSON NaN cannot occur, so NaN is absent."""

    ph: _Phase = ""
    cat: str = ""
    name: str | UnsetType = UNSET
    ts: float = math.nan
    dur: float = 0.0
    pid: int | str | None = None
    tid: int | str = -1
    args: _Args = _NO_ARGS


_DECODER = msgspec.json.Decoder(list[_Event])


@dataclass(frozen=True, slots=True)
class Batch:
    """One batch: typed events (`typed`), or orjson's objects when the types did not fit."""

    raw: bytearray
    events: list[Any]
    typed: bool


def decode(raw: bytearray) -> Batch:
    """Typed when the batch fits; orjson's result (or its error) otherwise."""
    try:
        return Batch(raw, _DECODER.decode(raw), True)
    except msgspec.DecodeError:  # not the types (ValidationError), or not JSON
        return Batch(raw, orjson.loads(raw), False)


def decode_generic(raw: bytearray) -> Batch:
    """orjson's objects, for the generic reader."""
    return Batch(raw, orjson.loads(raw), False)


# Group codes, in the order the generic reader concatenates each kind's categories.
_ORDER = (*GPU_CATS, *RUNTIME_CATS, *CPU_CATS, "gpu_user_annotation")
_CODE = {cat: code for code, cat in enumerate(_ORDER)}
_GPU = len(GPU_CATS)
_RUNTIME = _GPU + len(RUNTIME_CATS)
_CPU = _RUNTIME + len(CPU_CATS)
_GPU_KIND = np.array([int(kind) for kind in GPU_CATS.values()], dtype=np.int8)
_CPU_KIND = np.array([int(kind) for kind in CPU_CATS.values()], dtype=np.int8)
_USER, _GPU_USER, _CPU_OP = _CODE["user_annotation"], _CODE["gpu_user_annotation"], _CODE["cpu_op"]
_CORRELATION = attrgetter("correlation")


class Irregular(Exception):
    """A batch the typed reader leaves to the generic one (which gives the reference result)."""


def _take(values: tuple[Any, ...], index: npt.NDArray[np.intp]) -> tuple[Any, ...]:
    if len(index) == 0:
        return ()
    if len(index) == 1:
        return (values[int(index[0])],)
    taken: tuple[Any, ...] = itemgetter(*index.tolist())(values)
    return taken


def _ns(array: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """As `events.to_ns` for floats (ints below 2**53 are exact as floats); out of range or
    absent (NaN) is irregular: the generic reader words the error."""
    if len(array) and not (np.abs(array) < MAX_US).all():
        raise Irregular
    whole = np.floor(array)
    fraction: npt.NDArray[np.int64] = np.rint((array - whole) * 1000.0).astype(np.int64)
    ns: npt.NDArray[np.int64] = whole.astype(np.int64) * 1000 + fraction
    return ns


def _has_unset(values: tuple[Any, ...]) -> bool:
    return any(map(is_, values, repeat(UNSET)))


def _ints(values: tuple[Any, ...]) -> npt.NDArray[np.int64]:
    """Thread ids: ints only (a name is interned by the generic reader, in its order)."""
    if values and set(map(type, values)) != {int}:
        raise Irregular
    return np.asarray(values, dtype=np.int64)


class Reader:
    """Reads typed batches into one `TableBuilder` (`copies`: memcpy kind by name id)."""

    def __init__(self, builder: TableBuilder, copies: dict[int, tuple[int, bool]]) -> None:
        self.builder = builder
        self.copies = copies
        self._initial = np.zeros(0, dtype=np.bool_)  # per name id: starts like a range's name

    def ingest(self, events: list[_Event]) -> None:
        """Append the batch's kept events to the builder; raises `Irregular` (or a numpy
        conversion error), having changed nothing, when the batch is the generic reader's."""
        if not events:
            return
        ph, cat, name, ts, dur, pid, tid, args = zip(*map(astuple, events), strict=True)
        n = len(events)
        code = np.fromiter(map(_CODE.get, cat, repeat(-1)), dtype=np.int8, count=n)
        code[np.fromiter(map(ne, ph, repeat("X")), dtype=np.bool_, count=n)] = -1
        order = np.argsort(code, kind="stable")  # each kind's categories in their order
        bounds = np.searchsorted(code[order], [0, _GPU, _RUNTIME, _CPU])
        kept = order[bounds[0] :]
        if not len(kept):
            return
        lo = (bounds - bounds[0]).tolist()
        gpu, runtime, cpu = slice(lo[0], lo[1]), slice(lo[1], lo[2]), slice(lo[2], lo[3])
        kept_code = code[kept]
        start = _ns(np.fromiter(ts, dtype=np.float64, count=n)[kept])  # floats, typed
        end = start + _ns(np.fromiter(dur, dtype=np.float64, count=n)[kept])
        host = kept[runtime.start : cpu.stop]
        every_tid = np.asarray(tid)  # ints: int64; a name among them: strings
        tids = every_tid[host] if every_tid.dtype == np.int64 else _ints(_take(tid, host))
        known = np.fromiter(self.builder.strings.find(name), dtype=np.int64, count=n)[kept]
        names = None if (known >= 0).all() else _take(name, kept)
        if names is not None and _has_unset(names):
            raise Irregular
        gpu_args = _take(args, kept[gpu])
        gpu_columns = _gpu_columns(gpu_args, _take(pid, kept[gpu])) if gpu_args else None
        runtime_args = _take(args, kept[runtime])
        correlation = column(tuple(map(_CORRELATION, runtime_args)), np.int64, -1)
        # Nothing above changed the builder; from here on nothing fails.
        strings = self.builder.strings
        ids = known if names is None else np.asarray(strings.intern_all(names), dtype=np.int64)
        ranges, range_kinds = self._ranges(ids, kept_code)
        if gpu_columns is not None:
            gpu_kind = _GPU_KIND[kept_code[gpu]]
            self.builder.gpu.append(
                start_ns=start[gpu],
                end_ns=end[gpu],
                kind=gpu_kind,
                name=ids[gpu],
                **self._copy_columns(ids[gpu], gpu_kind),
                **gpu_columns,
            )
        if runtime.stop > runtime.start:
            self.builder.runtime.append(
                start_ns=start[runtime],
                end_ns=end[runtime],
                tid=tids[: runtime.stop - runtime.start],
                correlation=correlation,
                name=ids[runtime],
            )
        if cpu.stop > cpu.start:
            self.builder.cpu.append(
                start_ns=start[cpu],
                end_ns=end[cpu],
                tid=tids[runtime.stop - runtime.start :],
                kind=_CPU_KIND[kept_code[cpu] - _RUNTIME],
                name=ids[cpu],
            )
        if len(ranges):
            self.builder.ranges.append(
                start_ns=start[ranges], end_ns=end[ranges], kind=range_kinds, name=ids[ranges]
            )

    def _ranges(
        self, ids: npt.NDArray[np.int64], kept_code: npt.NDArray[np.int8]
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.int8]]:
        """Annotations in their order, then CPU ops named like a compiled region or a step:
        their positions among the kept events and their `RangeKind`s."""
        strings = self.builder.strings
        if len(self._initial) < len(strings):
            new = [strings[i] for i in range(len(self._initial), len(strings))]
            starts = map(str.startswith, new, repeat(RANGE_INITIALS))
            grown = np.fromiter(starts, dtype=np.bool_, count=len(new))
            self._initial = np.concatenate([self._initial, grown])
        cpu_ops = np.flatnonzero(kept_code == _CPU_OP)
        candidates = np.concatenate(
            [
                np.flatnonzero(kept_code == _USER),
                np.flatnonzero(kept_code == _GPU_USER),
                cpu_ops[self._initial[ids[cpu_ops]]],
            ]
        )
        kinds = np.asarray(
            [
                range_kind(strings[i], _ORDER[c])
                for i, c in zip(
                    ids[candidates].tolist(), kept_code[candidates].tolist(), strict=True
                )
            ],
            dtype=np.int8,
        )
        keep = kinds >= 0
        return candidates[keep], kinds[keep]

    def _copy_columns(
        self, ids: npt.NDArray[np.int64], kind: npt.NDArray[np.int8]
    ) -> dict[str, np.ndarray]:
        copy_kind_col = np.zeros(len(kind), dtype=np.int8)
        pageable = np.zeros(len(kind), dtype=np.bool_)
        for i in np.flatnonzero(kind == GpuOpKind.MEMCPY).tolist():
            name_id = int(ids[i])
            found = self.copies.get(name_id)
            if found is None:
                found = self.copies[name_id] = copy_kind(self.builder.strings[name_id])
            copy_kind_col[i], pageable[i] = found
        return {"copy_kind": copy_kind_col, "pageable": pageable}


def _gpu_columns(args: tuple[_Args, ...], pids: tuple[Any, ...]) -> dict[str, np.ndarray]:
    device, stream, correlation, num_bytes, occupancy = zip(*map(astuple, args), strict=True)
    if _has_unset(device):  # no device in args: the process id, as Kineto's GPU pid is the device
        device = tuple(p if d is UNSET else d for d, p in zip(device, pids, strict=True))
    return {
        "device": column(device, np.int32, -1),
        "stream": column(stream, np.int32, -1),
        "correlation": column(correlation, np.int64, -1),
        "num_bytes": column(num_bytes, np.int64, 0),
        "occupancy": column(occupancy, np.float32, math.nan) / 100,
    }
