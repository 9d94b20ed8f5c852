"""testing: synthetic inference traces with known answers, for tests and benchmarks.

Takes a `SynthSpec` (steps, layers, CUDA graphs on/off, tensor parallelism,
ProfilerStep markers on/off, padding CPU ops); gives the bytes of a
PyTorch-profiler (Kineto) Chrome trace of decode steps of a Llama-like model
(`trace_chunks`, one rank) and the `SynthTruth` the analyses must find. Each
step: host scheduling work (the GPU idles), an HtoD copy of the input ids, an
embedding, per layer RMSNorm → QKV GEMM → RoPE → FlashAttention → O GEMM
(→ NCCL all-reduce with TP) → fused add-norm → gate/up GEMM → SiLU-and-mul →
down GEMM (→ all-reduce), then the final norm, the LM-head GEMM, sampling, a
DtoH copy of the sampled ids and a stream synchronise. With CUDA graphs the
layers are one `cudaGraphLaunch`. No markers are written unless asked, so the
step detector must find the steps from the kernel pattern. Pure: the caller
writes the bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import orjson

__all__ = ["SynthSpec", "SynthTruth", "synth_truth", "trace_chunks"]

_PID, _TID, _STREAM, _DEVICE_PID = 4242, 4242, 7, 0
_HEAD = (("void at::native::indexSelectLargeIndex<c10::BFloat16, long>", 3.0),)
_LAYER = (
    ("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, int)", 3.0),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1", 14.0),
    ("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*)", 2.5),
    ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>>", 11.0),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x32x64_warpgroupsize1x1x1", 9.0),
    ("void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, int)", 3.5),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x64x64_warpgroupsize1x1x1", 28.0),
    ("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>>", 3.0),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_splitk_warpgroupsize1x1x1", 16.0),
)
_ALL_REDUCE = (
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    12.0,
)
_TAIL = (
    ("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, int) [final]", 3.0),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x2x1", 40.0),
    ("void at::native::reduce_kernel<512, 1, at::native::ArgMaxOps<float>>", 4.0),
)
_LAUNCH_CPU_US = 5.0  # one cudaLaunchKernel
_LAUNCH_LATENCY_US = 4.0  # call start → earliest kernel start
_CPU_GAP_US = 2.0  # Python between launches
_GRAPH_CPU_US = 12.0
_GRAPH_GAP_US = 1.0  # between kernels replayed by a graph
_COPY_US = 2.0
_SYNC_CPU_US = 3.0


@dataclass(frozen=True, slots=True)
class SynthSpec:
    num_steps: int = 20
    num_layers: int = 4
    cuda_graphs: bool = False
    tp: int = 1  # > 1 adds two all-reduces per layer
    rank: int = 0
    slowdown: float = 1.0  # this rank's kernels take this many times longer (rank skew)
    markers: bool = False  # write ProfilerStep#N annotations
    schedule_us: float = 300.0  # host work between steps, the GPU idles
    pad_cpu_ops: int = 0  # extra aten:: CPU events per launch (to grow a trace)


@dataclass(frozen=True, slots=True)
class SynthTruth:
    num_steps: int
    kernels_per_step: int
    num_kernels: int
    graph_launches: int
    graph_kernels: int
    comm_kernels: int


def _step_kernels(spec: SynthSpec) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """(graphable layer kernels, head and tail kernels) of one step."""
    layer = list(_LAYER)
    if spec.tp > 1:
        layer = [*layer[:5], _ALL_REDUCE, *layer[5:], _ALL_REDUCE]
    return layer * spec.num_layers, [*_HEAD, *_TAIL]


def synth_truth(spec: SynthSpec) -> SynthTruth:
    layers, edges = _step_kernels(spec)
    per_step = len(layers) + len(edges)
    comm = sum(1 for name, _ in layers if name.startswith("nccl")) * spec.num_steps
    return SynthTruth(
        num_steps=spec.num_steps,
        kernels_per_step=per_step,
        num_kernels=per_step * spec.num_steps,
        graph_launches=spec.num_steps if spec.cuda_graphs else 0,
        graph_kernels=len(layers) * spec.num_steps if spec.cuda_graphs else 0,
        comm_kernels=comm,
    )


class _Writer:
    """Keeps the two clocks (host and GPU) and the correlation counter while events are made."""

    def __init__(self, spec: SynthSpec) -> None:
        self.spec = spec
        self.cpu_us = 1_000.0
        self.gpu_us = 0.0
        self.correlation = 0
        self.events: list[dict[str, object]] = []

    def call(self, name: str, dur_us: float) -> tuple[int, float]:
        self.correlation += 1
        start = self.cpu_us
        for pad in range(self.spec.pad_cpu_ops):
            self.events.append(
                {
                    "ph": "X", "cat": "cpu_op", "name": f"aten::op_{pad}", "pid": _PID,
                    "tid": _TID, "ts": round(start, 3), "dur": round(dur_us, 3),
                    "args": {"External id": self.correlation, "Input Dims": [[1, 4096]]},
                }
            )  # fmt: skip
        self.events.append(
            {
                "ph": "X", "cat": "cuda_runtime", "name": name, "pid": _PID, "tid": _TID,
                "ts": round(start, 3), "dur": round(dur_us, 3),
                "args": {"cbid": 211, "correlation": self.correlation},
            }
        )  # fmt: skip
        self.cpu_us += dur_us
        return self.correlation, start

    def gpu(self, cat: str, name: str, dur_us: float, correlation: int, ready_us: float) -> None:
        start = max(self.gpu_us, ready_us)
        args: dict[str, object] = {
            "device": 0, "stream": _STREAM, "correlation": correlation,
            "External id": correlation,
        }  # fmt: skip
        if cat == "kernel":
            args["est. achieved occupancy %"] = 50
        else:
            args["bytes"] = 4096
        self.events.append(
            {
                "ph": "X", "cat": cat, "name": name, "pid": _DEVICE_PID, "tid": _STREAM,
                "ts": round(start, 3), "dur": round(dur_us, 3), "args": args,
            }
        )  # fmt: skip
        self.gpu_us = start + dur_us

    def launch(self, name: str, dur_us: float) -> None:
        correlation, start = self.call("cudaLaunchKernel", _LAUNCH_CPU_US)
        self.gpu(
            "kernel", name, dur_us * self.spec.slowdown, correlation, start + _LAUNCH_LATENCY_US
        )
        self.cpu_us += _CPU_GAP_US

    def graph(self, kernels: list[tuple[str, float]]) -> None:
        correlation, start = self.call("cudaGraphLaunch", _GRAPH_CPU_US)
        ready = start + _LAUNCH_LATENCY_US
        for name, dur in kernels:
            self.gpu("kernel", name, dur * self.spec.slowdown, correlation, ready)
            ready = self.gpu_us + _GRAPH_GAP_US

    def copy(self, name: str, api: str = "cudaMemcpyAsync") -> None:
        correlation, start = self.call(api, _LAUNCH_CPU_US)
        self.gpu("gpu_memcpy", name, _COPY_US, correlation, start + _LAUNCH_LATENCY_US)

    def step(self, index: int) -> None:
        spec = self.spec
        step_start = self.cpu_us
        self.cpu_us += spec.schedule_us
        layers, edges = _step_kernels(spec)
        self.copy("Memcpy HtoD (Pinned -> Device)")
        self.launch(*edges[0])
        if spec.cuda_graphs:
            self.graph(layers)
        else:
            for name, dur in layers:
                self.launch(name, dur)
        for name, dur in edges[1:]:
            self.launch(name, dur)
        self.copy("Memcpy DtoH (Device -> Pinned)")
        self.call("cudaStreamSynchronize", max(_SYNC_CPU_US, self.gpu_us - self.cpu_us))
        if spec.markers:
            self.events.append(
                {
                    "ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{index}",
                    "pid": _PID, "tid": _TID, "ts": round(step_start, 3),
                    "dur": round(self.cpu_us - step_start, 3),
                }
            )  # fmt: skip

    def take(self) -> list[dict[str, object]]:
        events, self.events = self.events, []
        return events


def trace_chunks(spec: SynthSpec, steps_per_chunk: int = 64) -> Iterator[bytes]:
    """The trace document, in pieces to write one after the other."""
    header = {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": spec.rank, "world_size": spec.tp},
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3 (synthetic)"}],
    }
    yield orjson.dumps(header)[:-1] + b', "traceEvents": [\n'
    writer = _Writer(spec)
    first = True
    for start in range(0, spec.num_steps, steps_per_chunk):
        for index in range(start, min(start + steps_per_chunk, spec.num_steps)):
            writer.step(index)
        body = b",\n".join(orjson.dumps(event) for event in writer.take())
        yield body if first else b",\n" + body
        first = False
    yield b'\n], "traceName": "infertriage synthetic decode trace"}\n'
