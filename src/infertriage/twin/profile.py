"""twin, level 2: a PyTorch-profiler (Kineto) trace of the twin's simulated steps.

Takes the `StepResult`s recorded between `/start_profile` and `/stop_profile`
and the scenario; gives the bytes of a gzipped Chrome trace in the format
vLLM writes when profiling is on: host runtime calls (`cudaLaunchKernel`, or
one `cudaGraphLaunch` per step with CUDA graphs), the kernels on one stream
(per layer: norm, QKV GEMM, attention — fused FlashAttention, or the unfused
softmax path with `attention_backend: naive` — O GEMM, an NCCL all-reduce
with TP > 1, norm, gate/up GEMM, activation, down GEMM, another all-reduce),
host scheduling time between steps, and the GPU idling between eager
launches. Kernel times divide each step's simulated compute and
communication; the trace is simulated, not measured. Under pipeline
parallelism it is the slowest stage's GPU (its rank and the world size say
so), with every layer's kernels: the stage's share of the layers and the
bubble's gaps between micro-batches are not drawn. No step markers are
written, as in vLLM's own traces.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence

import orjson

from infertriage.twin.engine import StepResult
from infertriage.twin.scenario_model import Scenario

__all__ = ["MAX_PROFILED_STEPS", "trace_bytes"]

MAX_PROFILED_STEPS = 400
_PID, _TID, _STREAM = 7001, 7001, 7
_GRAPH_GAP_S = 1e-6
_LAUNCH_LATENCY_S = 4e-6
_RUNTIME_S = 3e-6

# (name, share of a layer's compute)
_FLASH = ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>>", 0.12)
_NAIVE = (
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float>", 0.1),
    ("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_nn (attention scores bmm)", 0.1),
)
_NORM = ("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, int)", 0.03)
_QKV = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1", 0.15)
_O = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x32x64_warpgroupsize1x1x1", 0.1)
_GATE_UP = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x64x64_warpgroupsize1x1x1", 0.3)
_ACT = ("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>>", 0.03)
_DOWN = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_splitk_warpgroupsize1x1x1", 0.2)
_HEAD = (("void at::native::indexSelectLargeIndex<c10::BFloat16, long>", 0.02),)
_TAIL = (
    ("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, int) [final]", 0.03),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x2x1", 0.4),
    ("void at::native::reduce_kernel<512, 1, at::native::ArgMaxOps<float>>", 0.03),
)
_ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def _layer(scenario: Scenario) -> list[tuple[str, float]]:
    attention = [_FLASH] if scenario.engine.attention_backend == "flash" else list(_NAIVE)
    tp = scenario.tensor_parallel > 1
    comm = [(_ALL_REDUCE, -1.0)] if tp else []
    return [_NORM, _QKV, *attention, _O, *comm, _NORM, _GATE_UP, _ACT, _DOWN, *comm]


class _Writer:
    def __init__(self, scenario: Scenario, origin_s: float) -> None:
        self.scenario = scenario
        self.origin_s = origin_s
        self.events: list[dict[str, object]] = []
        self.correlation = 0

    def _us(self, t_s: float) -> float:
        return round((t_s - self.origin_s) * 1e6, 3)

    def runtime(self, name: str, start_s: float, dur_s: float) -> int:
        self.correlation += 1
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": name,
                "pid": _PID,
                "tid": _TID,
                "ts": self._us(start_s),
                "dur": round(dur_s * 1e6, 3),
                "args": {"correlation": self.correlation},
            }
        )
        return self.correlation

    def kernel(self, name: str, start_s: float, dur_s: float, correlation: int) -> None:
        self.events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": name,
                "pid": 0,
                "tid": _STREAM,
                "ts": self._us(start_s),
                "dur": round(max(dur_s, 1e-7) * 1e6, 3),
                "args": {"device": 0, "stream": _STREAM, "correlation": correlation},
            }
        )

    def step(self, result: StepResult) -> None:
        cost = result.cost
        if cost.num_kernels <= 0 or cost.kernel_s <= 0:
            return
        pattern = _layer(self.scenario)
        per_layer = len(pattern)
        num_layers = max(1, (cost.num_kernels - len(_HEAD) - len(_TAIL)) // per_layer)
        # the embedding before the layers and the LM head and sampler after them make each
        # step one period of the kernel pattern
        kernels = [*_HEAD, *pattern * num_layers, *_TAIL]
        compute_s = max(cost.kernel_s - cost.comm_s, 0.0)
        num_comm = sum(1 for _, share in kernels if share < 0)
        total_share = sum(share for _, share in kernels if share > 0)
        gap_s = cost.launch_gap_s / len(kernels)
        t = result.start_ts + cost.cpu_s
        graphs = self.scenario.engine.cuda_graphs
        graph_corr = (
            self.runtime("cudaGraphLaunch", t - _LAUNCH_LATENCY_S, _RUNTIME_S) if graphs else 0
        )
        for name, share in kernels:
            dur = cost.comm_s / num_comm if share < 0 else compute_s * share / total_share
            if graphs:
                self.kernel(name, t, dur, graph_corr)
                t += dur + min(_GRAPH_GAP_S, gap_s)
            else:
                t += gap_s
                corr = self.runtime("cudaLaunchKernel", t - _LAUNCH_LATENCY_S, _RUNTIME_S)
                self.kernel(name, t, dur, corr)
                t += dur


def _distributed(scenario: Scenario) -> dict[str, object]:
    """The rank the trace is of: rank 0, or under pipeline parallelism the first GPU of the
    last (slowest) stage, whose activity the cost model's breakdowns carry."""
    tp, stages = scenario.tensor_parallel, scenario.pipeline_parallel.size
    return {"backend": "nccl", "rank": (stages - 1) * tp, "world_size": tp * stages}


def trace_bytes(steps: Sequence[StepResult], scenario: Scenario) -> bytes:
    """The gzipped trace of up to `MAX_PROFILED_STEPS` steps."""
    origin = steps[0].start_ts if steps else 0.0
    writer = _Writer(scenario, origin)
    for result in steps[:MAX_PROFILED_STEPS]:
        writer.step(result)
    document = {
        "schemaVersion": 1,
        "distributedInfo": _distributed(scenario),
        "deviceProperties": [{"id": 0, "name": f"NVIDIA {scenario.gpu} (infertriage twin)"}],
        "traceEvents": writer.events,
        "traceName": "infertriage twin (simulated steps)",
    }
    return gzip.compress(orjson.dumps(document), compresslevel=5)
