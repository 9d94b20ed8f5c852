"""analyze, level 1: the kernel mix, the attention backend and the heaviest kernels.

Takes a `TraceTable` and its per-op category column; gives `Mix`: summed GPU
time per category, per attention backend, and the top kernels by GPU time.
The attention backend is the library whose fused kernels take the most
attention time. With no fused attention kernel, but GEMMs and at least
`MATH_SOFTMAX_PER_STEP` forward softmax kernels per step (one per layer: a
loss's single softmax does not count), it is `math`, PyTorch's unfused SDPA
path; else `none`. cuBLAS names do not say whether a GEMM is batched, so the
softmax count carries the decision.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from infertriage.analyze.trace.names import Category, attention_backend_of, is_softmax
from infertriage.analyze.trace.table import GpuOpKind, TraceTable

__all__ = ["MATH_SOFTMAX_PER_STEP", "KernelStat", "Mix", "get_mix", "merge_mixes"]

MATH_SOFTMAX_PER_STEP = 2


@dataclass(frozen=True, slots=True)
class KernelStat:
    name: str
    category: Category
    count: int
    total_ns: int


@dataclass(frozen=True, slots=True)
class Mix:
    ns_by_category: dict[Category, int]
    count_by_category: dict[Category, int]
    ns_by_backend: dict[str, int]
    num_softmax: int  # forward softmax kernels
    num_gemm: int
    top: tuple[KernelStat, ...]

    @property
    def total_ns(self) -> int:
        return sum(self.ns_by_category.values())

    def attention_backend(self, num_steps: int) -> str:
        """The dominant fused backend, `math` for the unfused path, or `none`."""
        if self.ns_by_backend:
            return max(self.ns_by_backend.items(), key=lambda kv: kv[1])[0]
        enough = self.num_softmax >= MATH_SOFTMAX_PER_STEP * max(num_steps, 1)
        return "math" if self.num_gemm and enough else "none"


def get_mix(table: TraceTable, cats: npt.NDArray[np.int8], top_n: int = 10) -> Mix:
    gpu = table.gpu
    durations = gpu.end_ns - gpu.start_ns
    present = np.unique(cats).tolist()
    by_category = {Category(c): int(durations[cats == c].sum()) for c in present}
    count_by_category = {Category(c): int((cats == c).sum()) for c in present}
    kernels = gpu.kind == GpuOpKind.KERNEL
    names, inverse, counts = np.unique(gpu.name, return_inverse=True, return_counts=True)
    totals = np.bincount(inverse, weights=durations, minlength=len(names))
    first_cat = np.zeros(len(names), dtype=np.int8)
    first_cat[inverse] = cats
    by_backend: dict[str, int] = {}
    softmax = gemm = 0
    kernel_names = set(np.unique(gpu.name[kernels]).tolist())
    for slot, name_id in enumerate(names.tolist()):
        if name_id not in kernel_names:
            continue
        text, cat = table.strings[name_id], first_cat[slot]
        backend = attention_backend_of(text) if cat == Category.ATTENTION else None
        if backend is not None:
            by_backend[backend] = by_backend.get(backend, 0) + int(totals[slot])
        softmax += int(counts[slot]) if is_softmax(text) else 0
        gemm += int(counts[slot]) if cat == Category.GEMM else 0
    heaviest = np.argsort(-totals, kind="stable")[:top_n]
    top = tuple(
        KernelStat(
            name=table.strings[int(names[i])],
            category=Category(int(first_cat[i])),
            count=int(counts[i]),
            total_ns=int(totals[i]),
        )
        for i in heaviest.tolist()
    )
    return Mix(by_category, count_by_category, by_backend, softmax, gemm, top)


def merge_mixes(mixes: list[Mix], top_n: int = 10) -> Mix:
    """The mix of several ranks: sums by category and backend; kernels merged by name."""
    by_category: dict[Category, int] = {}
    counts: dict[Category, int] = {}
    by_backend: dict[str, int] = {}
    kernels: dict[str, KernelStat] = {}
    for mix in mixes:
        for cat, ns in mix.ns_by_category.items():
            by_category[cat] = by_category.get(cat, 0) + ns
        for cat, n in mix.count_by_category.items():
            counts[cat] = counts.get(cat, 0) + n
        for backend, ns in mix.ns_by_backend.items():
            by_backend[backend] = by_backend.get(backend, 0) + ns
        for stat in mix.top:
            seen = kernels.get(stat.name)
            kernels[stat.name] = (
                stat
                if seen is None
                else KernelStat(
                    stat.name, stat.category, seen.count + stat.count, seen.total_ns + stat.total_ns
                )
            )
    top = tuple(sorted(kernels.values(), key=lambda k: -k.total_ns)[:top_n])
    return Mix(
        by_category,
        counts,
        by_backend,
        sum(m.num_softmax for m in mixes),
        sum(m.num_gemm for m in mixes),
        top,
    )
