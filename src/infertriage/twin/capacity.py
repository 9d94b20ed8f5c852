"""twin, level 2: the simulated GPU's memory, and how many KV blocks it holds.

Takes a `Scenario`; gives a frozen `Hardware`: the resolved `ModelSpec` and
`GpuSpec`, the weights per GPU, the activation reserve, KV bytes per token and
vLLM's `num_gpu_blocks` (from `plan.vllm_num_gpu_blocks`, null block included),
all per GPU under tensor parallelism. The activation reserve stands in for
vLLM's profiling run, estimated once for `plan` and the twin
(`plan.activation_peak_bytes`, the CUDA-graph pool and the runtime bytes): `plan`'s
KV block count lands within one block of what vLLM logs for Llama-3.1-8B.
Under pipeline parallelism each GPU holds its stage's share of the layers: the
weights and the KV bytes per token divide by the stages too (`num_gpus` is
tensor × pipeline parallel). Expert parallelism spreads the experts over the
tensor-parallel group (vLLM's layout), so its size is 1 or `tensor_parallel`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from infertriage.plan import (
    CUDA_GRAPH_POOL_BYTES,
    GpuSpec,
    ModelSpec,
    activation_peak_bytes,
    get_gpu,
    kv_bytes_per_token,
    normalize_dtype,
    runtime_bytes,
    vllm_num_gpu_blocks,
    weight_bytes,
)
from infertriage.schemas import UserError
from infertriage.twin.models import resolve_model
from infertriage.twin.scenario_model import EngineSettings, Scenario

__all__ = ["Hardware", "activation_reserve_bytes", "make_hardware"]


@dataclass(frozen=True, slots=True)
class Hardware:
    """The model on its GPUs: everything per GPU."""

    spec: ModelSpec
    gpu: GpuSpec
    dtype: str
    kv_dtype: str
    tensor_parallel: int
    interconnect: str
    weight_bytes_per_gpu: int
    activation_reserve_bytes: int
    kv_bytes_per_token: int
    block_size: int
    num_gpu_blocks: int  # vLLM's count, the null block included
    pipeline_parallel: int = 1

    @property
    def num_gpus(self) -> int:
        """Every GPU of the server: a stage's tensor-parallel group times the stages."""
        return self.tensor_parallel * self.pipeline_parallel

    @property
    def num_usable_blocks(self) -> int:
        return max(0, self.num_gpu_blocks - 1)

    @property
    def kv_cache_bytes(self) -> int:
        return self.num_gpu_blocks * self.block_size * self.kv_bytes_per_token

    @property
    def used_bytes_per_gpu(self) -> int:
        """Framebuffer the server holds once loaded: weights, reserve and the KV cache."""
        return self.weight_bytes_per_gpu + self.activation_reserve_bytes + self.kv_cache_bytes


def activation_reserve_bytes(spec: ModelSpec, engine: EngineSettings, tp: int) -> int:
    """Memory vLLM's profiling run finds besides weights, per GPU: `plan`'s activation peak,
    the CUDA-graph pool and the runtime, as `plan` counts them."""
    forward = activation_peak_bytes(spec, tp, engine.max_num_batched_tokens, engine.max_num_seqs)
    graphs = CUDA_GRAPH_POOL_BYTES if engine.cuda_graphs else 0
    return forward + graphs + runtime_bytes(tp)


def make_hardware(scenario: Scenario) -> Hardware:
    """Resolve the scenario's model and GPU and size its KV cache; `plan` raises `UserError`."""
    base_dir = Path(scenario.base_dir) if scenario.base_dir is not None else None
    spec = resolve_model(scenario.model, base_dir)
    gpu = get_gpu(scenario.gpu)
    dtype = normalize_dtype(scenario.dtype)
    tp = scenario.tensor_parallel
    pp = scenario.pipeline_parallel.size
    ep = scenario.expert_parallel.size
    if ep not in (1, tp):
        raise UserError(
            f"expert_parallel.size {ep} must be 1 or tensor_parallel ({tp}): the experts "
            "spread over the tensor-parallel group, as vLLM's --enable-expert-parallel lays them."
        )
    if ep > 1 and not spec.is_moe:
        raise UserError(f"expert_parallel needs a mixture-of-experts model; {spec.name} is dense.")
    engine = scenario.engine
    kv_dtype = "fp32" if dtype == "fp32" else "bf16"  # vLLM's kv_cache_dtype "auto"
    per_token = -(-kv_bytes_per_token(spec, kv_dtype, tp) // pp)
    weights = round(weight_bytes(spec, dtype) / tp / pp)
    reserve = activation_reserve_bytes(spec, engine, tp)
    if engine.num_gpu_blocks_override is not None:
        num_blocks = engine.num_gpu_blocks_override
    else:
        num_blocks = vllm_num_gpu_blocks(
            gpu.memory_bytes,
            engine.gpu_memory_utilization,
            weights + reserve,
            engine.block_size,
            per_token,
        )
    return Hardware(
        spec=spec,
        gpu=gpu,
        dtype=dtype,
        kv_dtype=kv_dtype,
        tensor_parallel=tp,
        interconnect=scenario.interconnect,
        weight_bytes_per_gpu=weights,
        activation_reserve_bytes=reserve,
        kv_bytes_per_token=per_token,
        block_size=engine.block_size,
        num_gpu_blocks=num_blocks,
        pipeline_parallel=pp,
    )
