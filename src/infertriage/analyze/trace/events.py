"""analyze, level 1: what the fields of a Chrome trace's events mean to the trace table.

Takes nothing; gives the categories a Kineto trace's events are kept by and
the kind each becomes (GPU op, runtime call, host work, range), the copy
direction a memcpy's name tells, and the conversions of raw values into
columns: microseconds to exact integer nanoseconds, numbers to a numpy
column with a default for what is not one. Both readers of `chrome`, the
typed one (`kineto`) and the generic one, share these, so they agree.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from infertriage.analyze.trace.jsonsplit import NotATrace
from infertriage.analyze.trace.table import CopyKind, CpuKind, GpuOpKind, RangeKind

__all__ = [
    "ANNOTATION_CATS",
    "CPU_CATS",
    "GPU_CATS",
    "MAX_US",
    "OCCUPANCY",
    "RANGE_INITIALS",
    "RUNTIME_CATS",
    "column",
    "copy_kind",
    "is_compiled_region",
    "range_kind",
    "to_ns",
]

GPU_CATS = {
    "kernel": GpuOpKind.KERNEL,
    "Kernel": GpuOpKind.KERNEL,
    "gpu_memcpy": GpuOpKind.MEMCPY,
    "Memcpy": GpuOpKind.MEMCPY,
    "gpu_memset": GpuOpKind.MEMSET,
    "Memset": GpuOpKind.MEMSET,
}
RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "Runtime", "Driver")
CPU_CATS = {
    "cpu_op": CpuKind.OP,
    "user_annotation": CpuKind.ANNOTATION,
    "python_function": CpuKind.PYTHON,
}
ANNOTATION_CATS = {
    "user_annotation": RangeKind.ANNOTATION,
    "gpu_user_annotation": RangeKind.GPU_ANNOTATION,
}
OCCUPANCY = "est. achieved occupancy %"
RANGE_INITIALS = ("T", "C", "P")  # Torch-Compiled Region, CompiledFunction, ProfilerStep#
MAX_US = 2**62 // 1000  # ~146 years: start + duration in nanoseconds stays an int64
_COMPILED = re.compile(r"^(Torch-Compiled Region|CompiledFunction|TorchDynamo Cache Lookup)")
_COPY = re.compile(r"Memcpy\s+([HDAP])to([HDAP])")
_COPY_KINDS = {
    ("H", "D"): CopyKind.HTOD,
    ("D", "H"): CopyKind.DTOH,
    ("D", "D"): CopyKind.DTOD,
    ("H", "H"): CopyKind.HTOH,
    ("P", "P"): CopyKind.PTOP,
}


def is_compiled_region(name: str) -> bool:
    """A torch.compile region as the profiler names it (`Torch-Compiled Region: 0/1`, …)."""
    return _COMPILED.match(name) is not None


def range_kind(name: object, cat: object) -> int:
    """The RangeKind of an event worth keeping as a range, or -1."""
    if not isinstance(name, str):
        return -1
    if _COMPILED.match(name):
        return RangeKind.COMPILED
    kind = ANNOTATION_CATS.get(str(cat))
    if kind is not None:
        return int(kind)
    return RangeKind.ANNOTATION if name.startswith("ProfilerStep#") else -1


def copy_kind(name: str) -> tuple[int, bool]:
    """A memcpy's direction (`CopyKind`) and whether its host side is pageable."""
    match = _COPY.search(name)
    pair = (match.group(1), match.group(2)) if match else ("", "")
    kind = _COPY_KINDS.get(pair, CopyKind.UNKNOWN)
    return int(kind), "Pageable" in name


def to_ns(values: Sequence[object] | np.ndarray) -> npt.NDArray[np.int64]:
    """Microsecond timestamps (ints, or floats with fractions) to integer nanoseconds."""
    array = np.asarray(values)
    if array.dtype.kind not in "iuf":
        raise NotATrace("some events have timestamps or durations that are not numbers")
    if len(array) and not (np.abs(array) < MAX_US).all():  # NaN fails too
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


def column(values: Sequence[object], dtype: type[np.generic], default: float) -> np.ndarray:
    """A numpy column; values that are not numbers (a string stream id, None) become `default`.
    An integer out of the dtype's range raises OverflowError, as numpy 2 does (numpy 1.x
    warns and wraps it: that warning is raised as the same error here)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            return np.asarray(values, dtype=dtype)
    except DeprecationWarning as err:
        raise OverflowError(str(err)) from None
    except (TypeError, ValueError):
        clean = [v if isinstance(v, int | float) else default for v in values]
        return np.asarray(clean, dtype=dtype)
