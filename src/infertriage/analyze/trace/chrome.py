"""analyze, level 1: load a PyTorch-profiler (Kineto) Chrome trace into a `TraceTable`.

Takes a `.json` or `.json.gz` file; gives one `TraceTable` (one rank). The
file is streamed (`jsonsplit`): events are parsed a batch at a time and only
the columns the analyses need are kept, as numpy arrays, with names interned.
A batch is decoded by msgspec into typed events and turned into columns
without Python code per event (`kineto`); one that does not fit those types
is read here, from orjson's dicts, which defines the result: both give the
same table. Garbage collection is paused while the file loads.
Kept: kernels, memcpys and memsets (`kernel`, `gpu_memcpy`, `gpu_memset`),
runtime and driver calls (`cuda_runtime`, `cuda_driver`, also HIP names),
user annotations (ProfilerStep#N, record_function) and torch.compile regions,
and the host's work per thread (`cpu_op`, `user_annotation`, `python_function`:
start, end, thread and name only), which names what the CPU was doing while
the GPU sat idle.
"""

from __future__ import annotations

import gc
import gzip
import re
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson

from infertriage.analyze.trace import kineto
from infertriage.analyze.trace.events import (
    ANNOTATION_CATS,
    CPU_CATS,
    GPU_CATS,
    OCCUPANCY,
    RANGE_INITIALS,
    RUNTIME_CATS,
    column,
    copy_kind,
    is_compiled_region,
    range_kind,
    to_ns,
)
from infertriage.analyze.trace.jsonsplit import NotATrace, TruncatedTrace, iter_decoded_batches
from infertriage.analyze.trace.table import GpuOpKind, TableBuilder, TraceTable
from infertriage.schemas.errors import UserError
from infertriage.schemas.inputs import GZIP_MAGIC, clip, open_gunzip

__all__ = ["is_compiled_region", "load_chrome"]

Event = dict[str, Any]
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


_EMPTY: Event = {}
_INITIALS = frozenset(RANGE_INITIALS)


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
        kinds = [GPU_CATS[e["cat"]] for e in events]
        copies = [
            self._copy(name) if kind == GpuOpKind.MEMCPY else (0, False)
            for name, kind in zip(names, kinds, strict=True)
        ]
        start = to_ns([e["ts"] for e in events])
        self.builder.gpu.append(
            start_ns=start,
            end_ns=start + to_ns([e.get("dur", 0) for e in events]),
            kind=kinds,
            device=column(
                [a.get("device", e.get("pid")) for a, e in zip(args, events, strict=True)],
                np.int32,
                -1,
            ),
            stream=column([a.get("stream", -1) for a in args], np.int32, -1),
            correlation=column([a.get("correlation", -1) for a in args], np.int64, -1),
            name=names,
            num_bytes=column([a.get("bytes", 0) for a in args], np.int64, 0),
            copy_kind=[c[0] for c in copies],
            pageable=[c[1] for c in copies],
            occupancy=column([a.get(OCCUPANCY, np.nan) for a in args], np.float32, np.nan) / 100,
        )

    def _copy(self, name: int) -> tuple[int, bool]:
        cached = self.copy_cache.get(name)
        if cached is None:
            cached = self.copy_cache[name] = copy_kind(self.strings[name])
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
        start = to_ns([e["ts"] for e in events])
        self.builder.runtime.append(
            start_ns=start,
            end_ns=start + to_ns([e.get("dur", 0) for e in events]),
            tid=self.tids(events),
            correlation=column([a.get("correlation", -1) for a in args], np.int64, -1),
            name=self.names(events),
        )

    def add_cpu(self, events: list[Event], kinds: list[int]) -> None:
        start = to_ns([e["ts"] for e in events])
        self.builder.cpu.append(
            start_ns=start,
            end_ns=start + to_ns([e.get("dur", 0) for e in events]),
            tid=self.tids(events),
            kind=kinds,
            name=self.names(events),
        )

    def add_ranges(self, events: list[Event], kinds: list[int]) -> None:
        start = to_ns([e["ts"] for e in events])
        self.builder.ranges.append(
            start_ns=start,
            end_ns=start + to_ns([e.get("dur", 0) for e in events]),
            kind=kinds,
            name=self.names(events),
        )


def _ingest(events: list[Any], sink: _Sink) -> None:
    if not all(type(e) is dict for e in events):
        raise NotATrace("its traceEvents are not JSON objects")
    by_cat: dict[object, list[Event]] = {}
    for event in events:
        if event.get("ph") == "X":
            by_cat.setdefault(event.get("cat"), []).append(event)
    gpu = [e for cat in GPU_CATS for e in by_cat.get(cat, ())]
    if gpu:
        sink.add_gpu(gpu)
    runtime = [e for cat in RUNTIME_CATS for e in by_cat.get(cat, ())]
    if runtime:
        sink.add_runtime(runtime)
    host = [(e, kind) for cat, kind in CPU_CATS.items() for e in by_cat.get(cat, ())]
    if host:
        sink.add_cpu([e for e, _ in host], [int(k) for _, k in host])
    # Ranges: annotations, and CPU ops named like a compiled region or a ProfilerStep.
    candidates = [e for cat in ANNOTATION_CATS for e in by_cat.get(cat, ())]
    candidates += [e for e in by_cat.get("cpu_op", ()) if e.get("name", "")[:1] in _INITIALS]
    kinds = [range_kind(e.get("name"), e.get("cat")) for e in candidates]
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


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No garbage collection while loading: the load makes no cycles, only many young objects."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _read(batch: kineto.Batch, reader: kineto.Reader, sink: _Sink) -> None:
    """The typed reader where the batch fits it, the generic one otherwise (same table)."""
    if batch.typed:
        try:
            reader.ingest(batch.events)
            return
        except (kineto.Irregular, TypeError, ValueError, OverflowError):
            events = orjson.loads(batch.raw)  # the generic reader's view, errors and all
    else:
        events = batch.events
    _ingest(events, sink)


def _reason(err: Exception) -> str:
    """Why the events are not a trace's, for the error sentence."""
    if isinstance(err, NotATrace):
        return str(err)
    if isinstance(err, KeyError):
        return f"an event lacks a field ({clip(str(err))})"
    return f"an event holds a value of the wrong type ({clip(str(err))})"


def load_chrome(path: Path, default_rank: int = 0, *, typed: bool = True) -> TraceTable:
    """Stream one Chrome trace file into a table; bad input is a `UserError` of one sentence.

    `typed=False` reads every batch with the generic reader: the reference the typed one
    is held to (the same table, the same errors)."""
    builder = TableBuilder()
    sink = _Sink(builder)
    reader = kineto.Reader(builder, sink.copy_cache)
    header: Event = {}
    try:
        with _open(path) as stream, _gc_paused():
            decode = kineto.decode if typed else kineto.decode_generic
            for batch in iter_decoded_batches(stream, header, decode):
                _read(batch, reader, sink)
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
