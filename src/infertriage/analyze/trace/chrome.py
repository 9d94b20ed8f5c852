"""analyze, level 1: load a PyTorch-profiler (Kineto) Chrome trace into a `TraceTable`.

Takes a `.json` or `.json.gz` file; gives one `TraceTable` (one rank). The
file is streamed (`jsonsplit`): events are parsed a batch at a time and only
the columns the analyses need are kept, as numpy arrays, with names interned.
Kept: kernels, memcpys and memsets (`kernel`, `gpu_memcpy`, `gpu_memset`),
runtime and driver calls (`cuda_runtime`, `cuda_driver`, also HIP names),
user annotations (ProfilerStep#N, record_function) and torch.compile regions,
and the host's work per thread (`cpu_op`, `user_annotation`, `python_function`:
start, end, thread and name only), which names what the CPU was doing while
the GPU sat idle.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

from infertriage.analyze.trace.jsonsplit import NotATrace, TruncatedTrace, iter_event_batches
from infertriage.analyze.trace.table import (
    CopyKind,
    CpuKind,
    GpuOpKind,
    RangeKind,
    TableBuilder,
    TraceTable,
)
from infertriage.schemas.errors import UserError
from infertriage.schemas.inputs import GZIP_MAGIC, clip, open_gunzip

__all__ = ["is_compiled_region", "load_chrome"]

Event = dict[str, Any]
_GPU_CATS = {
    "kernel": GpuOpKind.KERNEL,
    "Kernel": GpuOpKind.KERNEL,
    "gpu_memcpy": GpuOpKind.MEMCPY,
    "Memcpy": GpuOpKind.MEMCPY,
    "gpu_memset": GpuOpKind.MEMSET,
    "Memset": GpuOpKind.MEMSET,
}
_RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "Driver"})
_CPU_CATS = {
    "cpu_op": CpuKind.OP,
    "user_annotation": CpuKind.ANNOTATION,
    "python_function": CpuKind.PYTHON,
}
_ANNOTATION_CATS = {
    "user_annotation": RangeKind.ANNOTATION,
    "gpu_user_annotation": RangeKind.GPU_ANNOTATION,
}
_COMPILED = re.compile(r"^(Torch-Compiled Region|CompiledFunction|TorchDynamo Cache Lookup)")
_COPY = re.compile(r"Memcpy\s+([HDAP])to([HDAP])")
_COPY_KINDS = {
    ("H", "D"): CopyKind.HTOD,
    ("D", "H"): CopyKind.DTOH,
    ("D", "D"): CopyKind.DTOD,
    ("H", "H"): CopyKind.HTOH,
    ("P", "P"): CopyKind.PTOP,
}
_OCCUPANCY = "est. achieved occupancy %"
_RANGE_INITIALS = frozenset("TCP")  # Torch-Compiled Region, CompiledFunction, ProfilerStep#
_MAX_US = 2**62 // 1000  # ~146 years: start + duration in nanoseconds stays an int64
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


def is_compiled_region(name: str) -> bool:
    """A torch.compile region as the profiler names it (`Torch-Compiled Region: 0/1`, …)."""
    return _COMPILED.match(name) is not None


def _copy_kind(name: str) -> tuple[int, bool]:
    match = _COPY.search(name)
    pair = (match.group(1), match.group(2)) if match else ("", "")
    kind = _COPY_KINDS.get(pair, CopyKind.UNKNOWN)
    return int(kind), "Pageable" in name


def _ns(values: list[object]) -> npt.NDArray[np.int64]:
    """Microsecond timestamps (ints, or floats with fractions) to integer nanoseconds."""
    array = np.asarray(values)
    if array.dtype.kind not in "iuf":
        raise NotATrace("some events have timestamps or durations that are not numbers")
    if len(array) and not (np.abs(array) < _MAX_US).all():  # NaN fails too
        raise NotATrace(
            "some events have timestamps or durations out of range (not a number, or more "
            "microseconds than 146 years hold)"
        )
    if array.dtype.kind in "iu":
        ints: npt.NDArray[np.int64] = array.astype(np.int64) * 1000
        return ints
    whole = np.floor(array)
    fraction_ns: npt.NDArray[np.int64] = np.rint((array - whole) * 1000.0).astype(np.int64)
    ns: npt.NDArray[np.int64] = whole.astype(np.int64) * 1000 + fraction_ns
    return ns


def _column(values: list[object], dtype: type[np.generic], default: float) -> np.ndarray:
    """A numpy column; values that are not numbers (a string stream id, None) become `default`."""
    try:
        return np.asarray(values, dtype=dtype)
    except (TypeError, ValueError):
        clean = [v if isinstance(v, int | float) else default for v in values]
        return np.asarray(clean, dtype=dtype)


_EMPTY: Event = {}


def _args(events: list[Event]) -> list[Event]:
    return [a if type(a := e.get("args")) is dict else _EMPTY for e in events]


class _Sink:
    """Turns batches of event dicts into column chunks of a `TableBuilder`.

    Columns are built with list comprehensions over each category's events
    and converted by numpy in one call: per-event Python work is what bounds
    the loader's speed once orjson has parsed a batch.
    """

    def __init__(self, builder: TableBuilder) -> None:
        self.builder = builder
        self.strings = builder.strings
        self.copy_cache: dict[int, tuple[int, bool]] = {}

    def names(self, events: list[Event]) -> list[int]:
        intern = self.strings.intern
        return [intern(n if isinstance(n := e.get("name", ""), str) else str(n)) for e in events]

    def add_gpu(self, events: list[Event]) -> None:
        args = _args(events)
        names = self.names(events)
        kinds = [_GPU_CATS[e["cat"]] for e in events]
        copies = [
            self._copy(name) if kind == GpuOpKind.MEMCPY else (0, False)
            for name, kind in zip(names, kinds, strict=True)
        ]
        start = _ns([e["ts"] for e in events])
        self.builder.gpu.append(
            start_ns=start,
            end_ns=start + _ns([e.get("dur", 0) for e in events]),
            kind=kinds,
            device=_column(
                [a.get("device", e.get("pid")) for a, e in zip(args, events, strict=True)],
                np.int32,
                -1,
            ),
            stream=_column([a.get("stream", -1) for a in args], np.int32, -1),
            correlation=_column([a.get("correlation", -1) for a in args], np.int64, -1),
            name=names,
            num_bytes=_column([a.get("bytes", 0) for a in args], np.int64, 0),
            copy_kind=[c[0] for c in copies],
            pageable=[c[1] for c in copies],
            occupancy=_column([a.get(_OCCUPANCY, np.nan) for a in args], np.float32, np.nan) / 100,
        )

    def _copy(self, name: int) -> tuple[int, bool]:
        cached = self.copy_cache.get(name)
        if cached is None:
            cached = self.copy_cache[name] = _copy_kind(self.strings[name])
        return cached

    def tids(self, events: list[Event]) -> list[int]:
        """Thread ids; a name (some exporters write strings) becomes a negative id of its own."""
        tids = [e.get("tid", -1) for e in events]
        if not all(type(t) is int for t in tids):
            intern = self.strings.intern
            tids = [t if type(t) is int else -1 - intern(str(t)) for t in tids]
        return tids

    def add_runtime(self, events: list[Event]) -> None:
        args = _args(events)
        start = _ns([e["ts"] for e in events])
        self.builder.runtime.append(
            start_ns=start,
            end_ns=start + _ns([e.get("dur", 0) for e in events]),
            tid=self.tids(events),
            correlation=_column([a.get("correlation", -1) for a in args], np.int64, -1),
            name=self.names(events),
        )

    def add_cpu(self, events: list[Event], kinds: list[int]) -> None:
        start = _ns([e["ts"] for e in events])
        self.builder.cpu.append(
            start_ns=start,
            end_ns=start + _ns([e.get("dur", 0) for e in events]),
            tid=self.tids(events),
            kind=kinds,
            name=self.names(events),
        )

    def add_ranges(self, events: list[Event], kinds: list[int]) -> None:
        start = _ns([e["ts"] for e in events])
        self.builder.ranges.append(
            start_ns=start,
            end_ns=start + _ns([e.get("dur", 0) for e in events]),
            kind=kinds,
            name=self.names(events),
        )


def _range_kind(event: Event) -> int:
    """The RangeKind of an event worth keeping as a range, or -1."""
    name = event.get("name")
    if not isinstance(name, str):
        return -1
    if _COMPILED.match(name):
        return RangeKind.COMPILED
    kind = _ANNOTATION_CATS.get(str(event.get("cat")))
    if kind is not None:
        return int(kind)
    return RangeKind.ANNOTATION if name.startswith("ProfilerStep#") else -1


def _ingest(events: list[Any], sink: _Sink) -> None:
    if not all(type(e) is dict for e in events):
        raise NotATrace("its traceEvents are not JSON objects")
    by_cat: dict[object, list[Event]] = {}
    for event in events:
        if event.get("ph") == "X":
            by_cat.setdefault(event.get("cat"), []).append(event)
    gpu = [e for cat in _GPU_CATS for e in by_cat.get(cat, ())]
    if gpu:
        sink.add_gpu(gpu)
    runtime = [e for cat in _RUNTIME_CATS for e in by_cat.get(cat, ())]
    if runtime:
        sink.add_runtime(runtime)
    host = [(e, kind) for cat, kind in _CPU_CATS.items() for e in by_cat.get(cat, ())]
    if host:
        sink.add_cpu([e for e, _ in host], [int(k) for _, k in host])
    # Ranges: annotations, and CPU ops named like a compiled region or a ProfilerStep.
    candidates = [e for cat in _ANNOTATION_CATS for e in by_cat.get(cat, ())]
    candidates += [e for e in by_cat.get("cpu_op", ()) if e.get("name", "")[:1] in _RANGE_INITIALS]
    kinds = [_range_kind(e) for e in candidates]
    kept = [e for e, k in zip(candidates, kinds, strict=True) if k >= 0]
    if kept:
        sink.add_ranges(kept, [k for k in kinds if k >= 0])


@contextmanager
def _open(path: Path) -> Iterator[BinaryIO]:
    """The file's bytes, decompressed when it is gzip (told by its magic, not its name)."""
    with path.open("rb") as raw:
        if raw.read(2) != GZIP_MAGIC:
            raw.seek(0)
            yield raw
            return
        raw.seek(0)
        with open_gunzip(raw, str(path)) as unzipped:
            yield unzipped


def _rank(header: Event, path: Path, default: int) -> int:
    info = header.get("distributedInfo")
    if isinstance(info, dict) and type(info.get("rank")) is int:
        return int(info["rank"])
    match = _RANK_IN_NAME.search(path.name)
    return int(match.group(1)) if match else default


def _device_names(header: Event) -> dict[int, str]:
    props = header.get("deviceProperties")
    if not isinstance(props, list):
        return {}
    return {
        p["id"]: str(p.get("name", ""))
        for p in props
        if isinstance(p, dict) and type(p.get("id")) is int
    }


def _reason(err: Exception) -> str:
    """Why the events are not a trace's, for the error sentence."""
    if isinstance(err, NotATrace):
        return str(err)
    if isinstance(err, KeyError):
        return f"an event lacks a field ({clip(str(err))})"
    return f"an event holds a value of the wrong type ({clip(str(err))})"


def load_chrome(path: Path, default_rank: int = 0) -> TraceTable:
    """Stream one Chrome trace file into a table; bad input is a `UserError` of one sentence."""
    builder = TableBuilder()
    sink = _Sink(builder)
    header: Event = {}
    try:
        with _open(path) as stream:
            for events in iter_event_batches(stream, header):
                _ingest(events, sink)
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise UserError(f"{path} is a truncated or corrupt gzip file ({clip(str(err))}).") from err
    except OSError as err:
        raise UserError(f"{path} cannot be read ({err.strerror}).") from err
    except TruncatedTrace as err:
        raise UserError(f"{path} is truncated: {err}.") from err
    except (NotATrace, KeyError, TypeError, ValueError, OverflowError) as err:
        raise UserError(f"{path} is not a PyTorch-profiler trace: {_reason(err)}.") from err
    return builder.build(
        str(path), "pytorch", _rank(header, path, default_rank), _device_names(header)
    )
