"""plan, level 1: capacity and roofline planning, pure functions.

Takes a model (a catalogue preset or a Hugging Face config.json), a GPU from
the catalogue, dtypes and a parallel layout; gives the model's shape and
parameter counts, weight and KV-cache bytes, vLLM's KV block count, and a
roofline cost for each prefill and decode step (from which the twin draws
its step times and `plan` its TTFT and ITL).
"""

from infertriage.plan.advice import ParallelAdvice, advise_parallelism, smallest_replica_tp
from infertriage.plan.capacity import (
    CUDA_GRAPH_POOL_BYTES,
    CapacityPlan,
    KnobEffect,
    MemoryBreakdown,
    PlanInputs,
    RooflineSummary,
    activation_peak_bytes,
    make_capacity_plan,
    runtime_bytes,
)
from infertriage.plan.costparams import (
    Calibration,
    LinkParams,
    RooflineParams,
    calibration_for,
    params_for,
)
from infertriage.plan.fidelity import RegimeFidelity, ServingFidelity, serving_fidelity
from infertriage.plan.gpus import GpuSpec, LinkKind, get_gpu, list_gpus
from infertriage.plan.kvcache import KvCachePlan, vllm_kv_cache, vllm_num_gpu_blocks
from infertriage.plan.memory import (
    DTYPE_ALIASES,
    DTYPE_BYTES,
    ParamBreakdown,
    ParamCounts,
    kv_bytes_for_context,
    kv_bytes_per_token,
    kv_bytes_per_token_per_layer,
    linear_bytes_per_param,
    normalize_dtype,
    param_breakdown,
    param_counts,
    unquantized_bytes_per_param,
    weight_bytes,
)
from infertriage.plan.models import ModelSpec, list_model_presets, load_model, model_from_hf_config
from infertriage.plan.outcome import PlanReport, RunWorkload
from infertriage.plan.roofline import (
    Execution,
    LatencyEstimate,
    Routing,
    StepCost,
    StepWork,
    allreduce_s,
    decode_step_time,
    moe_experts_touched,
    peak_flops_per_s,
    prefill_time,
    step_allreduce_s,
    step_cost,
    step_work,
    ttft_itl,
)
from infertriage.plan.whatif import WHAT_IF_KEYS, WhatIfRow, parse_what_if, sweep

__all__ = [
    "CUDA_GRAPH_POOL_BYTES",
    "DTYPE_ALIASES",
    "DTYPE_BYTES",
    "WHAT_IF_KEYS",
    "Calibration",
    "CapacityPlan",
    "Execution",
    "GpuSpec",
    "KnobEffect",
    "KvCachePlan",
    "LatencyEstimate",
    "LinkKind",
    "LinkParams",
    "MemoryBreakdown",
    "ModelSpec",
    "ParallelAdvice",
    "ParamBreakdown",
    "ParamCounts",
    "PlanInputs",
    "PlanReport",
    "RegimeFidelity",
    "RooflineParams",
    "RooflineSummary",
    "Routing",
    "RunWorkload",
    "ServingFidelity",
    "StepCost",
    "StepWork",
    "WhatIfRow",
    "activation_peak_bytes",
    "advise_parallelism",
    "allreduce_s",
    "calibration_for",
    "decode_step_time",
    "get_gpu",
    "kv_bytes_for_context",
    "kv_bytes_per_token",
    "kv_bytes_per_token_per_layer",
    "linear_bytes_per_param",
    "list_gpus",
    "list_model_presets",
    "load_model",
    "make_capacity_plan",
    "model_from_hf_config",
    "moe_experts_touched",
    "normalize_dtype",
    "param_breakdown",
    "param_counts",
    "params_for",
    "parse_what_if",
    "peak_flops_per_s",
    "prefill_time",
    "runtime_bytes",
    "serving_fidelity",
    "smallest_replica_tp",
    "step_allreduce_s",
    "step_cost",
    "step_work",
    "sweep",
    "ttft_itl",
    "unquantized_bytes_per_param",
    "vllm_kv_cache",
    "vllm_num_gpu_blocks",
    "weight_bytes",
]
