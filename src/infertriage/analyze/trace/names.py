"""analyze, level 1: what a kernel or API name means.

Takes names from a trace's string table; gives, per name id, the kernel
category (GEMM, attention, communication, memory, elementwise/normalisation,
other), the attention backend, and whether a runtime call launches GPU work,
launches a CUDA graph, or blocks the host. Patterns cover old and new NCCL
names (`ncclKernel_*`, `ncclDevKernel_*`), RCCL and custom all-reduce kernels,
ROCm (`hip*`, Tensile `Cijk_*`, CK), Triton kernels (`triton_*`, launched
through `cuLaunchKernel`), cuBLAS/CUTLASS/nvjet GEMMs and the attention
libraries that inference servers use.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import IntEnum

import numpy as np
import numpy.typing as npt

__all__ = [
    "ATTENTION_BACKENDS",
    "Category",
    "attention_backend_of",
    "categorize",
    "category_of",
    "is_graph_launch",
    "is_launch",
    "is_softmax",
    "is_sync",
]


class Category(IntEnum):
    GEMM = 0
    ATTENTION = 1
    COMMUNICATION = 2
    MEMORY = 3  # memcpy and memset
    ELEMENTWISE = 4  # elementwise, reductions, normalisation, activations, copies
    OTHER = 5


class _Folded:
    """A case-insensitive pattern, searched as fast as a case-sensitive one.

    Python's `re.IGNORECASE` alternations try every branch at every position of a name;
    compiled case-sensitive, an alternation first checks each branch's first character.
    An ASCII name is lower-cased and searched with the lower-cased pattern (for ASCII
    text the same matches: about 6x faster on long templated kernel names); any other
    name with the pattern itself under `re.IGNORECASE`, as before.
    """

    __slots__ = ("_lower", "pattern")

    def __init__(self, pattern: str) -> None:
        if re.search(r"\\[A-Z]", pattern):  # \S, \W, \D … would change meaning lower-cased
            raise ValueError(f"no upper-case escapes in a folded pattern: {pattern!r}")
        self.pattern = pattern
        self._lower = re.compile(pattern.lower())

    def search(self, name: str) -> re.Match[str] | None:
        if name.isascii():
            return self._lower.search(name.lower())
        return re.search(self.pattern, name, re.IGNORECASE)


_COMMUNICATION = _Folded(
    r"nccl|rccl|msccl|nvshmem|cross_device_reduce|custom_?all_?reduce|one_?shot_?all_?reduce"
    r"|two_?shot_?all_?reduce|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|sendrecv"
    r"|quickreduce|deep_?ep"
)
# Order matters: FA3 and cuDNN SDPA names contain "cutlass"/"gemm"-like words, so attention first.
_ATTENTION_BACKEND_PATTERNS: tuple[tuple[str, re.Pattern[str] | _Folded], ...] = (
    ("cudnn_sdpa", _Folded(r"sdpa|cudnn.*(flash|fmha|attn)")),
    ("flashinfer", re.compile(r"flashinfer|BatchPrefillWith|BatchDecodeWith|SinglePrefill")),
    ("flash_attn_3", _Folded(r"FlashAttn\w*Sm90|flash\w*sm90|flash_?attn_?3|fa3_")),
    ("flash_attn_2", _Folded(r"flash_fwd|flash_bwd|flash::|flash_attn|FlashAttn")),
    ("xformers", _Folded(r"xformers|fmha_cutlass|cutlassF|cutlassB|efficient_attention")),
    ("paged_attention", _Folded(r"paged_attention")),
    ("trtllm", _Folded(r"fmha_v2|xqa|masked_multihead_attention|mmha")),
    ("rocm_ck", _Folded(r"ck_?fmha|ck_tile.*fmha|aiter.*(attn|fmha)")),
    (
        "triton",
        _Folded(
            r"unified_attention|triton\w*attn|attn_fwd|_fwd_(grouped_)?kernel_stage|"
            r"context_attention|prefix_prefill"
        ),
    ),
    ("other_fused", _Folded(r"attention|attn|fmha|mha_")),
)
ATTENTION_BACKENDS: tuple[str, ...] = (
    *(name for name, _ in _ATTENTION_BACKEND_PATTERNS),
    "math",
    "none",
)
_GEMM = _Folded(
    r"gemm|gemv|sgemm|hgemm|cublas|cutlass|xmma|nvjet|wgmma|matmul|splitkreduce|Cijk_|_mm_|"
    r"triton_tem|marlin|machete|convolve|conv2d|convolution|winograd|s884|h884|s1688|h1688|s16816|h16816|bmm|"
    r"implicit_gemm|dgrad|wgrad|fprop"
)
_ELEMENTWISE = _Folded(
    r"elementwise|reduce|norm|softmax|act_and_mul|silu|gelu|relu|swiglu|rotary|rope|copy|fill|"
    r"cat|index|gather|scatter|dropout|pool|transpose|nchw|nhwc|triton_poi|triton_red|"
    r"triton_per|fused|scan|sort|topk|argmax|sampl|embedding|cache|cast|add|mul|div|sub|where|"
    r"arange|permute|bn_|memcpy|memset"
)
_SOFTMAX = _Folded(r"softmax(?!.*(backward|bwd|grad))")

_LAUNCH = re.compile(
    r"^(cuda|hip)(LaunchKernel|LaunchKernelExC|LaunchCooperativeKernel|ExtModuleLaunchKernel|"
    r"ModuleLaunchKernel|ExtLaunchKernel|GraphLaunch|Memcpy|Memset)|^cu(LaunchKernel|"
    r"LaunchKernelEx|LaunchCooperativeKernel|GraphLaunch|Memcpy|Memset)|^hipExtLaunch"
)
_GRAPH_LAUNCH = re.compile(r"^(cuda|hip|cu)GraphLaunch")
_SYNC = re.compile(
    r"^(cuda|hip)(DeviceSynchronize|StreamSynchronize|EventSynchronize|ThreadSynchronize)|"
    r"^cu(CtxSynchronize|StreamSynchronize|EventSynchronize)"
)
_VERSION_SUFFIX = re.compile(r"_v\d+$|_ptsz$|_ptds$")


def _api(name: str) -> str:
    """nsys writes versioned API names (`cudaLaunchKernel_v7000`); compare the base."""
    return _VERSION_SUFFIX.sub("", name)


def category_of(name: str) -> Category:
    """The category of one kernel name (memcpy and memset ops are categorised by their kind)."""
    if _COMMUNICATION.search(name):
        return Category.COMMUNICATION
    if attention_backend_of(name) is not None:
        return Category.ATTENTION
    if _GEMM.search(name):
        return Category.GEMM
    if _ELEMENTWISE.search(name):
        return Category.ELEMENTWISE
    return Category.OTHER


def attention_backend_of(name: str) -> str | None:
    """The attention library of a fused attention kernel, or None when it is not one."""
    for backend, pattern in _ATTENTION_BACKEND_PATTERNS:
        if pattern.search(name):
            return backend
    return None


def is_softmax(name: str) -> bool:
    """A forward softmax kernel (the unfused attention path runs one per layer)."""
    return _SOFTMAX.search(name) is not None


def is_launch(name: str) -> bool:
    """A runtime or driver call that puts work on the GPU (kernel, graph, copy, set)."""
    return _LAUNCH.search(_api(name)) is not None


def is_graph_launch(name: str) -> bool:
    return _GRAPH_LAUNCH.search(_api(name)) is not None


def is_sync(name: str) -> bool:
    """A call that blocks the host until GPU work finishes."""
    return _SYNC.search(_api(name)) is not None


def categorize(strings: Sequence[str]) -> npt.NDArray[np.int8]:
    """Category per string (a lookup table a column of name ids can be indexed with)."""
    return np.fromiter((category_of(s) for s in strings), dtype=np.int8, count=len(strings))
