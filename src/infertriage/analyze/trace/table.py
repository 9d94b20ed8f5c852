"""analyze, level 1: the one in-memory table a trace is parsed into.

Takes column chunks from a loader (`chrome`, `nsys`); gives a `TraceTable`:
GPU activity (kernels, memcpy, memset), CUDA/HIP runtime and driver calls,
CPU-side ranges (profiler steps, user annotations, NVTX, torch.compile
regions) and the host's own work per thread (CPU operators, annotations,
Python frames: what the idle-gap analysis names), each a set of numpy
columns, with every name interned once in a string table. Times are integer
nanoseconds on the trace's own clock; the analyses turn them into seconds.
Every analysis is a function of this table.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from itertools import repeat

import numpy as np
import numpy.typing as npt

__all__ = [
    "CopyKind",
    "CpuKind",
    "CpuOps",
    "GpuOpKind",
    "GpuOps",
    "RangeKind",
    "Ranges",
    "RuntimeCalls",
    "StringTable",
    "TableBuilder",
    "TraceTable",
]

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
I8 = npt.NDArray[np.int8]
F32 = npt.NDArray[np.float32]
Bools = npt.NDArray[np.bool_]


class GpuOpKind(IntEnum):
    KERNEL = 0
    MEMCPY = 1
    MEMSET = 2


class CopyKind(IntEnum):
    """Direction of a memcpy; `NONE` for kernels and memsets."""

    NONE = 0
    HTOD = 1
    DTOH = 2
    DTOD = 3
    HTOH = 4
    PTOP = 5
    UNKNOWN = 6


class RangeKind(IntEnum):
    """What a CPU-side range is: the step-marker and compile analyses choose by kind and name."""

    ANNOTATION = 0  # PyTorch user_annotation (ProfilerStep#N, record_function)
    GPU_ANNOTATION = 1  # the GPU-side copy Kineto makes of an annotation
    NVTX = 2
    COMPILED = 3  # torch.compile: "Torch-Compiled Region", "CompiledFunction"


class CpuKind(IntEnum):
    """What a host event on a thread is: the idle analysis names operators before frames."""

    OP = 0  # cpu_op (aten::…)
    ANNOTATION = 1  # user_annotation (record_function, ProfilerStep#N)
    PYTHON = 2  # python_function (a Python frame, `nn.Module: …`)


class StringTable:
    """Interned strings: each distinct name is stored once and referred to by an int32 id."""

    __slots__ = ("_ids", "_names")

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._names: list[str] = []

    def intern(self, name: str) -> int:
        found = self._ids.get(name)
        if found is None:
            found = len(self._names)
            self._ids[name] = found
            self._names.append(name)
        return found

    def intern_all(self, names: Sequence[str]) -> list[int]:
        """The ids of many names, new ones interned in order (as `intern` one by one)."""
        found: list[int | None] = list(map(self._ids.get, names))
        if None not in found:
            return found  # type: ignore[return-value]
        intern = self.intern
        return [intern(n) if i is None else i for i, n in zip(found, names, strict=True)]

    def find(self, names: Iterable[object]) -> Iterator[int]:
        """The id of each name, -1 for one not interned."""
        return map(self._ids.get, names, repeat(-1))  # type: ignore[arg-type]

    def __getitem__(self, index: int) -> str:
        return self._names[index]

    def __len__(self) -> int:
        return len(self._names)

    def freeze(self) -> tuple[str, ...]:
        return tuple(self._names)


def _empty(dtype: type[np.generic]) -> np.ndarray:
    return np.zeros(0, dtype=dtype)


@dataclass(frozen=True, slots=True)
class GpuOps:
    """Kernels, memcpys and memsets on the GPU, sorted by start."""

    start_ns: I64
    end_ns: I64
    kind: I8  # GpuOpKind
    device: I32
    stream: I32
    correlation: I64  # the runtime call that launched it; -1 when unknown
    name: I32  # id in TraceTable.strings
    num_bytes: I64  # memcpy / memset size; 0 for kernels
    copy_kind: I8  # CopyKind
    pageable: Bools  # the host side of a memcpy is pageable memory
    occupancy: F32  # estimated achieved occupancy 0..1, NaN when the trace has none

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass(frozen=True, slots=True)
class RuntimeCalls:
    """CUDA/HIP runtime and driver API calls on the host, sorted by start."""

    start_ns: I64
    end_ns: I64
    tid: I64
    correlation: I64
    name: I32

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass(frozen=True, slots=True)
class Ranges:
    """CPU-side named ranges: steps, annotations, NVTX and compiled regions, sorted by start."""

    start_ns: I64
    end_ns: I64
    kind: I8  # RangeKind
    name: I32

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass(frozen=True, slots=True)
class CpuOps:
    """The host's work on each thread (operators, annotations, Python frames), sorted by start."""

    start_ns: I64
    end_ns: I64
    tid: I64
    kind: I8  # CpuKind
    name: I32

    def __len__(self) -> int:
        return len(self.start_ns)


def _no_cpu_ops() -> CpuOps:
    return CpuOps(**{name: _empty(dtype) for name, dtype in _CPU_COLUMNS})


@dataclass(frozen=True, slots=True)
class TraceTable:
    """One rank's trace: GPU ops, runtime calls and ranges, plus what the file said of itself.

    `launcher` maps each GPU op to the index of its runtime call in `runtime`
    (-1 when the trace has no such call: a kernel from an untraced thread).
    """

    path: str
    fmt: str  # "pytorch" or "nsys"
    rank: int
    strings: tuple[str, ...]
    gpu: GpuOps
    runtime: RuntimeCalls
    ranges: Ranges
    launcher: I64
    device_names: dict[int, str] = field(default_factory=dict)
    cpu: CpuOps = field(default_factory=_no_cpu_ops)  # empty when the trace has none (nsys)

    def names_of(self, ids: I32) -> list[str]:
        return [self.strings[i] for i in ids.tolist()]

    def select_gpu(self, keep: Bools) -> TraceTable:
        """The same table with only the GPU ops where `keep` holds."""
        gpu = GpuOps(**{name: getattr(self.gpu, name)[keep] for name, _ in _GPU_COLUMNS})
        return replace(self, gpu=gpu, launcher=self.launcher[keep])


_GPU_COLUMNS = (
    ("start_ns", np.int64),
    ("end_ns", np.int64),
    ("kind", np.int8),
    ("device", np.int32),
    ("stream", np.int32),
    ("correlation", np.int64),
    ("name", np.int32),
    ("num_bytes", np.int64),
    ("copy_kind", np.int8),
    ("pageable", np.bool_),
    ("occupancy", np.float32),
)
_RUNTIME_COLUMNS = (
    ("start_ns", np.int64),
    ("end_ns", np.int64),
    ("tid", np.int64),
    ("correlation", np.int64),
    ("name", np.int32),
)
_CPU_COLUMNS = (
    ("start_ns", np.int64),
    ("end_ns", np.int64),
    ("tid", np.int64),
    ("kind", np.int8),
    ("name", np.int32),
)
_RANGE_COLUMNS = (
    ("start_ns", np.int64),
    ("end_ns", np.int64),
    ("kind", np.int8),
    ("name", np.int32),
)


class _Columns:
    """Column chunks appended by a loader, concatenated once when the table is built."""

    __slots__ = ("_chunks", "_spec")

    def __init__(self, spec: tuple[tuple[str, type[np.generic]], ...]) -> None:
        self._spec = spec
        self._chunks: dict[str, list[np.ndarray]] = {name: [] for name, _ in spec}

    def append(self, **columns: object) -> None:
        """One chunk: every column, each an array-like of the same length."""
        if set(columns) != set(self._chunks):
            raise ValueError(f"columns {sorted(columns)} != {sorted(self._chunks)}")
        for name, dtype in self._spec:
            self._chunks[name].append(np.asarray(columns[name], dtype=dtype))

    def arrays(self) -> dict[str, np.ndarray]:
        """Each column whole, the chunks let go column by column (peak memory: the columns
        plus one column's chunks, not twice the table): the builder is emptied."""
        out: dict[str, np.ndarray] = {}
        for name, dtype in self._spec:
            chunks = self._chunks[name]
            out[name] = np.concatenate(chunks) if chunks else _empty(dtype)
            chunks.clear()
        return out


def _sorted(columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The columns by start (stable), each replaced in turn so one copy is held at a time."""
    start = columns["start_ns"]
    if np.all(start[1:] >= start[:-1]):
        return columns
    order = np.argsort(start, kind="stable")
    for name in list(columns):
        columns[name] = columns[name][order]
    return columns


def _join_launchers(gpu: GpuOps, runtime: RuntimeCalls) -> I64:
    """For each GPU op, the index of the runtime call with its correlation id, or -1."""
    launcher = np.full(len(gpu), -1, dtype=np.int64)
    if not len(runtime) or not len(gpu):
        return launcher
    order = np.argsort(runtime.correlation, kind="stable")
    keys = runtime.correlation[order]
    pos = np.searchsorted(keys, gpu.correlation)
    pos_clipped = np.minimum(pos, len(keys) - 1)
    hit = (keys[pos_clipped] == gpu.correlation) & (gpu.correlation >= 0)
    launcher[hit] = order[pos_clipped[hit]]
    return launcher


class TableBuilder:
    """What a loader fills: column chunks for `gpu`, `runtime` and `ranges`, and `strings`.

    A loader appends one chunk of columns at a time (named as the dataclass
    fields; `cpu` may stay empty); `build()` concatenates, sorts by start, joins GPU ops to their
    launching calls and freezes the table, taking the chunks with it (build once).
    """

    def __init__(self) -> None:
        self.strings = StringTable()
        self.gpu = _Columns(_GPU_COLUMNS)
        self.runtime = _Columns(_RUNTIME_COLUMNS)
        self.ranges = _Columns(_RANGE_COLUMNS)
        self.cpu = _Columns(_CPU_COLUMNS)

    def build(
        self, path: str, fmt: str, rank: int, device_names: dict[int, str] | None = None
    ) -> TraceTable:
        gpu = GpuOps(**_sorted(self.gpu.arrays()))
        runtime = RuntimeCalls(**_sorted(self.runtime.arrays()))
        ranges = Ranges(**_sorted(self.ranges.arrays()))
        return TraceTable(
            path=path,
            fmt=fmt,
            rank=rank,
            strings=self.strings.freeze(),
            gpu=gpu,
            runtime=runtime,
            ranges=ranges,
            launcher=_join_launchers(gpu, runtime),
            device_names=dict(device_names or {}),
            cpu=CpuOps(**_sorted(self.cpu.arrays())),
        )
