"""Fit `plan`'s cost model to published measurements and print every point's error.

    PYTHONPATH=src python benchmarks/fit_costmodel.py            # fit, print, do not write
    PYTHONPATH=src python benchmarks/fit_costmodel.py --write    # ... and write the table
    PYTHONPATH=src python benchmarks/fit_costmodel.py --check    # the packaged table's errors

Data (`$INFERTRIAGE_FIXTURES/calibration`, else `../shared/fixtures/calibration`):

- `trtllm_0.9.0_static_batch.csv`: TensorRT-LLM 0.9 static-batch first-token latency (TTFT:
  one prefill of the whole batch) and token-to-token latency (ITL) by model, GPU, batch, TP,
  lengths and precision. Rows on GPUs of `plan`'s catalogue (H100-SXM, H200, A100-80GB, L40S)
  and Llama-2 7B/13B/70B, Mistral-7B and Mixtral-8x7B are used; "Mixed" is FP16 weights and
  KV, "FP8" is FP8 weights and KV cache.
- `h100_dgx_all_reduce.csv`: Vidur's NCCL all-reduce times on an 8×H100 DGX, 2/4/8 ranks:
  fits NVLink's `α₀ + α₁ · log₂(n/2)` latency and the bus-bandwidth efficiency.

What is fitted, per GPU generation (not per row): HBM and tensor-core efficiencies, the
GEMM ramp `n½`, the per-step, per-layer and per-request fixed costs; per interconnect the
all-reduce latency and bandwidth efficiency. The outer search is a Nelder-Mead simplex over
the efficiencies; the fixed costs are linear in the prediction and come from a weighted
least-squares solve inside it. The objective is the squared relative error.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from infertriage.plan import (
    Execution,
    GpuSpec,
    LinkParams,
    ModelSpec,
    RooflineParams,
    get_gpu,
    load_model,
    model_from_hf_config,
    peak_flops_per_s,
    ttft_itl,
)
from infertriage_testing.vllm_runs import load_stages

_ROOT = Path(__file__).resolve().parents[1]
_TABLE = _ROOT / "src/infertriage/plan/data/costmodel.json"
_GPUS = {
    "H100 80GB HBM3": "H100-SXM",
    "H200 141GB HBM3": "H200",
    "A100-SXM4-80GB": "A100-80GB",
    "L40S": "L40S",
}
_LLAMA2 = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 32000,
    "tie_word_embeddings": False,
    "max_position_embeddings": 4096,
}
_CONFIGS: dict[str, dict[str, object]] = {
    "LLaMA v2 13B": {
        **_LLAMA2,
        "hidden_size": 5120,
        "intermediate_size": 13824,
        "num_hidden_layers": 40,
        "num_attention_heads": 40,
        "num_key_value_heads": 40,
    },
    "LLaMA v2 70B": {
        **_LLAMA2,
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
    },
    "Mistral 7B": {
        **_LLAMA2,
        "model_type": "mistral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "sliding_window": 4096,
    },
}
_PRESETS = {"LLaMA v2 7B": "llama-2-7b", "Mixtral 8x7B": "mixtral-8x7b"}
# Every run of the dataset used fake weights ("Use Fake Weight": Yes): a router with synthetic
# weights sends every token to the same top-k experts, so a batch reads k experts, not the
# `E · (1 − (1 − k/E)^B)` real traffic reaches. The fit models the runs as they were.
_EXECUTION = Execution(routing="collapsed")


def without_gqa_kernel(point: Point) -> bool:
    """TensorRT-LLM 0.9 decoding Mistral-7B (GQA 4, sliding window) with an FP8 KV cache on
    Hopper: its ITL equals Llama-2-7B's (MHA, 4x the KV) within 2-25 % at every batch and
    context, while with an FP16 KV, or on the L40S, it is the 0.5-0.8x that GQA's smaller KV
    gives. That engine did not run its GQA kernel (XQA) there; today's engines do, and the
    model assumes they do, so these points are reported apart and not fitted."""
    return (
        point.metric == "ITL"
        and point.spec.num_sliding_layers > 0
        and point.dtype == "fp8"
        and point.gpu.generation == "hopper"
        and point.batch > 1
    )


_SOURCE = "TensorRT-LLM 0.9 static batch, dense Llama-2/Mistral; an HTTP front end adds to TTFT"
# Held out (not fitted): the published NIM point the roofline tests already pin.
_HELD_OUT = (("llama-3.3-70b", "H100-SXM", "fp8", 2, 5000, 500, 0.40677, 0.01858),)


@dataclass(frozen=True, slots=True)
class Point:
    """One published figure and the work the model does for it (params-independent)."""

    label: str
    gpu: GpuSpec
    spec: ModelSpec
    dtype: str
    tp: int
    batch: int
    input_len: int
    output_len: int
    metric: str  # "TTFT" or "ITL"
    measured_s: float
    execution: Execution = _EXECUTION
    weight: float = 1.0  # of this point's squared relative error in the fit


def _fixtures() -> Path:
    """$INFERTRIAGE_FIXTURES/calibration, else ../shared/fixtures/calibration beside the project."""
    env = os.environ.get("INFERTRIAGE_FIXTURES")
    base = Path(env) if env else _ROOT.parent / "shared" / "fixtures"
    return base / "calibration"


def _spec(name: str) -> ModelSpec | None:
    if name in _PRESETS:
        return load_model(_PRESETS[name])
    if name in _CONFIGS:
        return model_from_hf_config(_CONFIGS[name], name.lower().replace(" ", "-"))
    return None


def load_points(path: Path | None = None) -> list[Point]:
    """TTFT and ITL of every usable TensorRT-LLM row."""
    points: list[Point] = []
    path = _fixtures() / "trtllm_0.9.0_static_batch.csv" if path is None else path
    with path.open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            gpu_name, spec = _GPUS.get(row["GPU"]), _spec(row["Model"])
            if gpu_name is None or spec is None or not row["Token-to-token Latency (ms)"]:
                continue
            if row["Pipeline Model Parallel Size"] != "1":
                continue
            dtype = "fp16" if row["Precision"] == "Mixed" else "fp8"
            tp, batch = int(row["Tensor Model Parallel Size"]), int(row["Batch Size"])
            input_len, output_len = (int(x) for x in row["Input/Output Lengths"].split(","))
            shape = f"tp{tp} b{batch:<4} {input_len}/{output_len}"
            label = f"{row['Model']:<13} {gpu_name:<9} {dtype:<4} {shape}"
            for metric, column in (
                ("TTFT", "1st Token Latency (ms)"),
                ("ITL", "Token-to-token Latency (ms)"),
            ):
                points.append(
                    Point(label, get_gpu(gpu_name), spec, dtype, tp, batch, input_len,
                          output_len, metric, float(row[column]) / 1e3)
                )  # fmt: skip
    return points


# The real vLLM stages together weigh this share of a generation's fit (they are 19 points
# against the static table's hundreds, and the regime `plan` and the twin are used in).
VLLM_SHARE = 0.5


def load_vllm_points() -> list[Point]:
    """One decode point per real vLLM stage that held (no client lost a request).

    Little's law gives the batch (achieved rate × mean E2E) and the measured per-token
    interval `(E2E − TTFT) / (output − 1)` is one decode step of that batch at the mean
    context of decoding; the prompts were cycled, so after the first cycle their prefill is
    a prefix-cache hit and the steps are decode steps. Real weights: MoE routing uniform.
    """
    stages = [s for s in load_stages() if not s.overloaded]
    gpu = get_gpu("H100-SXM")
    points = []
    for s in stages:
        label = f"vLLM {s.label:<40}"[:58]
        points.append(
            Point(label, gpu, load_model(s.model), "bf16", s.tensor_parallel,
                  max(1, round(s.concurrency)), round(s.prompt_len), s.output_len, "ITL",
                  s.token_interval_s, Execution())
        )  # fmt: skip
    return points


def weighted(real: Sequence[Point], num_static: int) -> list[Point]:
    """`real` with weights that give them `VLLM_SHARE` of a fit beside `num_static` points."""
    if not real:
        return []
    weight = VLLM_SHARE / (1 - VLLM_SHARE) * num_static / len(real)
    return [replace(p, weight=weight) for p in real]


def predict(point: Point, params: RooflineParams) -> float:
    kv_dtype = "fp8" if point.dtype == "fp8" else "fp16"
    est = ttft_itl(
        point.spec, point.gpu, point.dtype, point.tp, point.input_len, point.output_len,
        kv_dtype=kv_dtype, params=params, batch_size=point.batch, execution=point.execution,
    )  # fmt: skip
    return est.ttft_s if point.metric == "TTFT" else est.itl_s


# ---------------------------------------------------------------------------- vectorised model

_UNIT = RooflineParams(
    mem_efficiency=1.0,
    compute_efficiency=1.0,
    kv_mem_efficiency=1.0,
    attention_half_rows=0.0,
    expert_efficiency=1.0,
    compute_half_tokens=0.0,
    step_overhead_s=0.0,
    layer_overhead_s=0.0,
    seq_overhead_s=0.0,
    request_overhead_s=0.0,
    nvlink=LinkParams(0.0, 0.0, 1.0),
    pcie=LinkParams(0.0, 0.0, 1.0),
)


@dataclass(frozen=True, slots=True)
class Work:
    """Per point: each kernel family's roofs at unit efficiency, rows, and fixed-cost counts."""

    gemm: np.ndarray  # s of dense GEMM FLOPs at η_c = 1, no ramp
    expert: np.ndarray  # s of routed-expert GEMM FLOPs at η_c = 1, no ramp
    weights: np.ndarray  # s of weight bytes at η_m = 1
    prefill_attention: np.ndarray  # s of a prefill's attention FLOPs at η_c = 1 (16-bit peak)
    decode_attention: np.ndarray  # s of a decode's attention FLOPs at η_c = 1 (16-bit peak)
    query_group: np.ndarray  # query heads per KV head: a decode attention matmul's rows
    kv: np.ndarray  # s of KV bytes at η_kv = 1
    tokens: np.ndarray  # rows of the dense GEMMs (their ramp)
    expert_tokens: np.ndarray  # rows of each expert GEMM
    seqs: np.ndarray  # sequences in the step
    layers: np.ndarray
    is_ttft: np.ndarray
    allreduces: np.ndarray  # all-reduces per step
    doublings: np.ndarray  # log₂(tp) − 1 where tp > 1
    comm_bw: np.ndarray  # s of all-reduce bandwidth at η_link = 1
    measured: np.ndarray
    weight: np.ndarray  # of each point's squared relative error


def make_work(points: Sequence[Point]) -> Work:
    cols: dict[str, list[float]] = {k: [] for k in Work.__dataclass_fields__}
    for point in points:
        kv_dtype = "fp8" if point.dtype == "fp8" else "fp16"
        est = ttft_itl(
            point.spec, point.gpu, point.dtype, point.tp, point.input_len, point.output_len,
            kv_dtype=kv_dtype, params=_UNIT, batch_size=point.batch, execution=point.execution,
        )  # fmt: skip
        step = est.prefill if point.metric == "TTFT" else est.decode
        work = step.work
        peak = peak_flops_per_s(point.gpu, point.dtype)
        bandwidth = point.gpu.mem_bw_bytes_per_s
        multi = point.tp > 1
        cols["gemm"].append(work.gemm_flops / peak)
        cols["expert"].append(work.expert_flops / peak)
        cols["weights"].append(work.weight_bytes / bandwidth)
        cols["prefill_attention"].append(work.prefill_attention_flops / point.gpu.bf16_flops_per_s)
        cols["decode_attention"].append(work.decode_attention_flops / point.gpu.bf16_flops_per_s)
        cols["query_group"].append(work.query_group)
        cols["kv"].append(work.kv_bytes / bandwidth)
        cols["tokens"].append(work.num_tokens)
        cols["expert_tokens"].append(work.expert_tokens)
        cols["seqs"].append(work.num_seqs)
        cols["layers"].append(work.num_layers)
        cols["is_ttft"].append(float(point.metric == "TTFT"))
        cols["allreduces"].append(2 * point.spec.num_layers if multi else 0)
        cols["doublings"].append(math.log2(point.tp) - 1 if multi else 0)
        cols["comm_bw"].append(work.comm_s)
        cols["measured"].append(point.measured_s)
        cols["weight"].append(point.weight)
    return Work(**{k: np.array(v, dtype=float) for k, v in cols.items()})


_LINEAR = ("step", "layer", "seq", "request", "alpha0", "alpha1", "inv_link_eff")


def _design(work: Work, eff: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the roof part of each prediction, the matrix of the linear terms).

    `eff` is (η_m, η_c, n½, η_kv, g½, η_expert), as `plan.roofline.step_cost` applies them.
    """
    mem_eff, comp_eff, half, kv_eff, half_rows, expert_eff = eff
    gemm_compute = work.gemm * (1 + half / np.maximum(work.tokens, 1)) / comp_eff
    gemm_compute += (
        work.expert * (1 + half / np.maximum(work.expert_tokens, 1)) / (comp_eff * expert_eff)
    )
    roof = np.maximum(gemm_compute, work.weights / mem_eff)
    decode_ramp = 1 + half_rows / work.query_group
    attention = (work.prefill_attention + work.decode_attention * decode_ramp) / comp_eff
    roof += np.maximum(attention, work.kv / kv_eff)
    matrix = np.column_stack(
        [
            np.ones_like(roof),
            work.layers,
            work.seqs,
            work.is_ttft,
            work.allreduces,
            work.allreduces * work.doublings,
            work.comm_bw,
        ]
    )
    return roof, matrix


def _solve_linear(work: Work, eff: np.ndarray, fixed: dict[str, float]) -> np.ndarray:
    """Non-negative weighted least squares for the linear terms, `fixed` ones held."""
    roof, matrix = _design(work, eff)
    weight = np.sqrt(work.weight) / work.measured
    target = work.measured - roof
    free = [i for i, name in enumerate(_LINEAR) if name not in fixed]
    held = np.array([fixed.get(name, 0.0) for name in _LINEAR])
    target = target - matrix @ held
    coef = held.copy()
    active = [i for i in free if np.any(matrix[:, i] != 0)]
    while active:
        a = matrix[:, active] * weight[:, None]
        solution = np.linalg.lstsq(a, target * weight, rcond=None)[0]
        if np.all(solution >= 0):
            coef[active] = solution
            break
        active = [i for i, c in zip(active, solution, strict=True) if c > 0]
    return coef


def _relative_errors(work: Work, eff: np.ndarray, coef: np.ndarray) -> np.ndarray:
    roof, matrix = _design(work, eff)
    return (roof + matrix @ coef) / work.measured - 1


def nelder_mead(
    f: Callable[[np.ndarray], float], x0: np.ndarray, step: float = 0.1, iters: int = 300
) -> np.ndarray:
    """A plain Nelder-Mead simplex (numpy only; the project does not depend on scipy)."""
    simplex = [x0] + [
        x0 + step * np.eye(len(x0))[i] * max(abs(x0[i]), 1e-3) for i in range(len(x0))
    ]
    values = [f(x) for x in simplex]
    for _ in range(iters):
        order = np.argsort(values)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        centroid = np.mean(simplex[:-1], axis=0)
        reflected = centroid + (centroid - simplex[-1])
        fr = f(reflected)
        if fr < values[0]:
            expanded = centroid + 2 * (centroid - simplex[-1])
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (simplex[-1] - centroid)
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                best = simplex[0]
                simplex = [best + 0.5 * (x - best) for x in simplex]
                values = [f(x) for x in simplex]
    return simplex[int(np.argmin(values))]


def _bounded(x: np.ndarray) -> np.ndarray:
    # HBM streams reach ~90 % of the datasheet at best, tensor cores ~85 % of the dense peak.
    return np.array(
        [
            min(0.9, max(0.05, x[0])),
            min(0.85, max(0.05, x[1])),
            max(0.0, x[2]),
            min(0.9, max(0.05, x[3])),
            max(0.0, x[4]),
            min(1.0, max(0.05, x[5])),
        ]
    )


def fit_generation(work: Work, fixed: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """Efficiencies (η_m, η_c, n½, η_kv, g½) and linear terms that minimise the squared relative
    error of dense models (η_expert stays 1: no expert does any work)."""

    def loss(x: np.ndarray) -> float:
        eff = _bounded(np.append(x, 1.0))
        errors = _relative_errors(work, eff, _solve_linear(work, eff, fixed))
        return float(np.average(errors**2, weights=work.weight))

    start = np.array([0.8, 0.6, 50.0, 0.6, 64.0])
    best = _bounded(np.append(nelder_mead(loss, start, step=0.2), 1.0))
    return best, _solve_linear(work, best, fixed)


def fit_experts(work: Work, eff: np.ndarray, coef: np.ndarray) -> float:
    """η_expert on MoE points, the generation's other constants held: a golden-section search."""

    def loss(value: float) -> float:
        errors = _relative_errors(work, _bounded(np.append(eff[:5], value)), coef)
        return float(np.average(errors**2, weights=work.weight))

    low, high = 0.05, 1.0
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(60):
        a, b = high - ratio * (high - low), low + ratio * (high - low)
        if loss(a) < loss(b):
            high = b
        else:
            low = a
    return (low + high) / 2


# ---------------------------------------------------------------------------- report


def vidur_nvlink() -> tuple[float, float, float]:
    """(α at 2 ranks, α added per doubling, bus-bandwidth efficiency) from Vidur's H100 data."""
    alphas, effs = [], []
    with (_fixtures() / "h100_dgx_all_reduce.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for ranks in (2, 4, 8):
        mine = [r for r in rows if int(r["num_workers"]) == ranks]
        size = np.array([float(r["size"]) for r in mine])
        secs = np.array([float(r["time_stats.all_reduce.median"]) for r in mine]) / 1e3
        alpha = float(np.median(secs[size < 1e6]))
        big = size > 8e6
        moved = 2 * (ranks - 1) / ranks * size[big]
        busbw = float(np.median(moved / (secs[big] - alpha)))
        alphas.append(alpha)
        effs.append(busbw / get_gpu("H100-SXM").link_bw_bytes_per_s)
    return alphas[0], (alphas[2] - alphas[0]) / 2, float(np.median(effs))


_VIDUR_GEMMS = (  # Vidur's operator name -> parameters of that GEMM (hidden h, KV width kv, MLP i)
    ("attn_pre_proj", lambda h, kv, i: h * (h + 2 * kv)),
    ("attn_post_proj", lambda h, kv, i: h * h),
    ("mlp_up_proj", lambda h, kv, i: 2 * h * i),
    ("mlp_down_proj", lambda h, kv, i: h * i),
)


def vidur_gemms(params: RooflineParams) -> None:
    """Cross-check, not fitted: one layer's four GEMMs against Vidur's per-operator times
    (Llama-2-7B, H100, eager PyTorch, 1-4,096 tokens, TP 1-8)."""
    gpu = get_gpu("H100-SXM")
    with (_fixtures() / "h100_llama2_7b_mlp.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    buckets: dict[tuple[int, str], list[float]] = {}
    for row in rows:
        tokens, tp = int(row["num_tokens"]), int(row["num_tensor_parallel_workers"])
        hidden, heads = int(row["n_embd"]), int(row["n_head"])
        kv_width, inter = int(row["n_kv_head"]) * hidden // heads, int(row["n_expanded_embd"])
        measured = sum(float(row[f"time_stats.{op}.median"]) for op, _ in _VIDUR_GEMMS) / 1e3
        predicted = 0.0
        for _, count in _VIDUR_GEMMS:
            n_params = count(hidden, kv_width, inter) / tp
            compute = 2 * n_params * tokens * (1 + params.compute_half_tokens / tokens)
            predicted += max(
                compute / (gpu.bf16_flops_per_s * params.compute_efficiency),
                2 * n_params / (gpu.mem_bw_bytes_per_s * params.mem_efficiency),
            )
        span = next(b for b in (16, 128, 1024, 4096) if tokens <= b)
        buckets.setdefault((tp, f"<= {span:>4} tokens"), []).append(predicted / measured - 1)
    print("\ncross-check, not fitted: one layer's GEMMs vs Vidur's per-operator times (H100):")
    for (tp, span), errors in sorted(buckets.items()):
        signed = statistics.median(errors)
        worst = max(errors, key=abs)
        print(
            f"  tp{tp} {span}: {len(errors):3d} shapes  median {signed:+6.1%}  worst {worst:+6.1%}"
        )


def _params(eff: np.ndarray, coef: np.ndarray, pcie: LinkParams | None = None) -> RooflineParams:
    named = dict(zip(_LINEAR, coef, strict=True))
    link = LinkParams(named["alpha0"], named["alpha1"], min(1.0, 1 / named["inv_link_eff"]), True)
    return RooflineParams(
        mem_efficiency=float(eff[0]),
        compute_efficiency=float(eff[1]),
        compute_half_tokens=float(eff[2]),
        kv_mem_efficiency=float(eff[3]),
        attention_half_rows=float(eff[4]),
        expert_efficiency=float(eff[5]),
        step_overhead_s=named["step"],
        layer_overhead_s=named["layer"],
        seq_overhead_s=named["seq"],
        request_overhead_s=named["request"],
        nvlink=link,
        pcie=link if pcie is None else pcie,
    )


def _summary(errors: Sequence[float]) -> str:
    if not errors:
        return "no points"
    mags = sorted(abs(e) for e in errors)
    p90 = mags[min(len(mags) - 1, int(0.9 * len(mags)))]
    within = sum(m <= 0.2 for m in mags) / len(mags)
    return (
        f"{len(mags):4d} points  median |err| {statistics.median(mags):5.1%}  p90 {p90:5.1%}  "
        f"max {mags[-1]:6.1%}  within 20 % {within:5.1%}"
    )


def _regimes(points: Sequence[Point]) -> dict[str, list[int]]:
    """Index lists: batch 1, saturation (the largest batch of each configuration), the rest."""
    largest: dict[tuple[str, str, int, int, int, str], int] = {}
    for p in points:
        key = (p.spec.name, p.gpu.name, p.tp, p.input_len, p.output_len, p.dtype)
        largest[key] = max(largest.get(key, 0), p.batch)
    out: dict[str, list[int]] = {"batch 1": [], "saturation": [], "other batches": []}
    for i, p in enumerate(points):
        key = (p.spec.name, p.gpu.name, p.tp, p.input_len, p.output_len, p.dtype)
        name = (
            "batch 1"
            if p.batch == 1
            else "saturation"
            if p.batch == largest[key]
            else "other batches"
        )
        out[name].append(i)
    return out


def report(
    points: Sequence[Point], params: dict[str, RooflineParams], rows: bool
) -> dict[str, list[float]]:
    """Print every point (when `rows`) and the summaries; return the errors per generation."""
    errors = [predict(p, params[p.gpu.generation]) / p.measured_s - 1 for p in points]
    if rows:
        print(f"{'point':<58} {'metric':<5} {'predicted':>10} {'measured':>10} {'error':>7}")
        for p, e in zip(points, errors, strict=True):
            pred = p.measured_s * (1 + e)
            print(
                f"{p.label:<58} {p.metric:<5} {pred * 1e3:8.2f}ms "
                f"{p.measured_s * 1e3:8.2f}ms {e:+7.1%}"
            )
    per_generation: dict[str, list[float]] = {}
    for generation in sorted({p.gpu.generation for p in points}):
        mine = [i for i, p in enumerate(points) if p.gpu.generation == generation]
        per_generation[generation] = [errors[i] for i in mine]
        print(f"\n{generation}: {_summary([errors[i] for i in mine])}")
        for regime, idx in _regimes([points[i] for i in mine]).items():
            for metric in ("TTFT", "ITL"):
                sel = [errors[mine[j]] for j in idx if points[mine[j]].metric == metric]
                print(f"  {regime:<14} {metric:<5} {_summary(sel)}")
    return per_generation


def held_out(params: RooflineParams) -> None:
    print("\nheld out (published NIM point, not fitted):")
    for name, gpu, dtype, tp, i, o, ttft, itl in _HELD_OUT:
        est = ttft_itl(
            load_model(name), get_gpu(gpu), dtype, tp, i, o, kv_dtype="fp8", params=params
        )
        print(
            f"  {name} {gpu} {dtype} tp{tp} {i}/{o}: TTFT {est.ttft_s * 1e3:.1f} ms vs "
            f"{ttft * 1e3:.1f} ({est.ttft_s / ttft - 1:+.1%}), ITL {est.itl_s * 1e3:.2f} ms vs "
            f"{itl * 1e3:.2f} ({est.itl_s / itl - 1:+.1%})"
        )


def _apart_note(errors: Sequence[float]) -> str:
    if not errors:
        return ""
    median, worst = _median_max(errors)
    return (
        f"; {len(errors)} Mistral-7B FP8-KV decode points set apart, where that engine ran "
        f"no GQA kernel (±{median:.0%} median, worst {worst:.0%})"
    )


def _real_note(errors: Sequence[float]) -> str:
    if not errors:
        return ""
    median, worst = _median_max(errors)
    return (
        f"; with {len(errors)} real vLLM decode steps under continuous batching (inference-perf "
        f"stages, batch by Little's law: ±{median:.0%} median, worst {worst:.0%})"
    )


def _median_max(errors: Sequence[float]) -> list[float]:
    mags = [abs(e) for e in errors]
    return [round(statistics.median(mags), 4), round(max(mags), 4)]


def _write(  # noqa: PLR0917 — the fit and each error set it reports
    params: dict[str, RooflineParams],
    errors: dict[str, list[float]],
    points: Sequence[Point],
    moe_errors: dict[str, list[float]],
    apart_errors: dict[str, list[float]],
    real_errors: dict[str, list[float]],
) -> None:
    generations = {}
    for generation, p in params.items():
        mags = sorted(abs(e) for e in errors[generation])
        mine = [q for q in points if q.gpu.generation == generation]
        regimes = _regimes(mine)
        generations[generation] = {
            "mem_efficiency": round(p.mem_efficiency, 4),
            "compute_efficiency": round(p.compute_efficiency, 4),
            "kv_mem_efficiency": round(p.kv_mem_efficiency, 4),
            "attention_half_rows": round(p.attention_half_rows, 1),
            "expert_efficiency": round(p.expert_efficiency, 4),
            "compute_half_tokens": round(p.compute_half_tokens, 1),
            "step_overhead_s": round(p.step_overhead_s, 7),
            "layer_overhead_s": round(p.layer_overhead_s, 8),
            "seq_overhead_s": round(p.seq_overhead_s, 8),
            "request_overhead_s": round(p.request_overhead_s, 7),
            "num_points": len(mags),
            "median_abs_error": round(statistics.median(mags), 4),
            "max_abs_error": round(mags[-1], 4),
            "batch_one": _median_max([errors[generation][i] for i in regimes["batch 1"]]),
            "saturation": _median_max([errors[generation][i] for i in regimes["saturation"]]),
            "moe_points": len(moe_errors.get(generation, [])),
            "moe": _median_max(moe_errors[generation]) if generation in moe_errors else [0, 0],
            "source": _SOURCE
            + _real_note(real_errors.get(generation, []))
            + _apart_note(apart_errors.get(generation, [])),
        }
    hopper, ada = params["hopper"], params["ada"]
    table = {
        "_note": (
            "Written by benchmarks/fit_costmodel.py --write from TensorRT-LLM 0.9 static-batch "
            "TTFT/ITL (NVIDIA DLI sizing data, fake weights: MoE routing collapsed), real vLLM "
            "on H100 under load (inference-perf stages that held, weighing half of Hopper's "
            "fit) and Vidur's 8xH100 all-reduce times; "
            "nvlink fitted on Hopper (cross-checked against Vidur), pcie on L40S. "
            "Do not edit by hand."
        ),
        "generations": generations,
        "borrow": {"blackwell": "hopper", "cdna3": "hopper"},
        "links": {
            name: {
                "alpha_s": round(link.alpha_s, 8),
                "alpha_per_doubling_s": round(link.alpha_per_doubling_s, 8),
                "bw_efficiency": round(link.bw_efficiency, 4),
                "calibrated": True,
            }
            for name, link in (("nvlink", hopper.nvlink), ("pcie", ada.pcie))
        },
    }
    _TABLE.write_text(json.dumps(table, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {_TABLE.relative_to(_ROOT)}")


def _fit_one(points: Sequence[Point], generation: str, held: dict[str, float]) -> RooflineParams:
    """One generation: dense points fix every constant but η_expert, MoE points then fix it."""
    mine = [p for p in points if p.gpu.generation == generation]
    eff, coef = fit_generation(make_work([p for p in mine if not p.spec.is_moe]), held)
    moe = [p for p in mine if p.spec.is_moe]
    if moe:
        eff[5] = fit_experts(make_work(moe), eff, coef)
    return _params(eff, coef)


def fit(points: Sequence[Point], real: Sequence[Point] = ()) -> dict[str, RooflineParams]:
    """Hopper's static table first (it fixes NVLink: TP 1-8 there, 2-4 only in the real
    runs), then Hopper again with the `real` vLLM points and that link, then Ampere with
    that link, then Ada (PCIe only)."""
    points = [p for p in points if not without_gqa_kernel(p)]
    nvlink = _fit_one(points, "hopper", {}).nvlink
    held = {"alpha0": nvlink.alpha_s, "alpha1": nvlink.alpha_per_doubling_s,
            "inv_link_eff": 1 / nvlink.bw_efficiency}  # fmt: skip
    params = {"hopper": _fit_one([*points, *real], "hopper", held)}
    params["ampere"] = _fit_one(points, "ampere", held)
    ada = _fit_one(points, "ada", {})
    params["ada"] = replace(ada, nvlink=nvlink)
    params["hopper"] = replace(params["hopper"], pcie=ada.pcie)
    params["ampere"] = replace(params["ampere"], pcie=ada.pcie)
    return params


def _print_params(params: dict[str, RooflineParams]) -> None:
    for generation, p in params.items():
        print(
            f"{generation:<7} η_m {p.mem_efficiency:.3f}  η_c {p.compute_efficiency:.3f}  "
            f"η_kv {p.kv_mem_efficiency:.3f}  g½ {p.attention_half_rows:5.0f}  "
            f"η_expert {p.expert_efficiency:.3f}  "
            f"n½ {p.compute_half_tokens:5.0f}  step {p.step_overhead_s * 1e3:.3f} ms  "
            f"layer {p.layer_overhead_s * 1e6:5.1f} µs  seq {p.seq_overhead_s * 1e6:5.1f} µs  "
            f"request {p.request_overhead_s * 1e3:.3f} ms"
        )
    for name, link in (("nvlink", params["hopper"].nvlink), ("pcie", params["ada"].pcie)):
        print(
            f"{name:<7} α₀ {link.alpha_s * 1e6:.1f} µs  α₁ {link.alpha_per_doubling_s * 1e6:.1f} µs"
            f"/doubling  η_link {link.bw_efficiency:.2f}"
        )
    a0, a1, eta = vidur_nvlink()
    print(
        f"Vidur   α₀ {a0 * 1e6:.1f} µs  α₁ {a1 * 1e6:.1f} µs/doubling  η_link {eta:.2f} "
        "(eager NCCL, 8×H100)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="write the fitted table")
    parser.add_argument("--check", action="store_true", help="report the packaged table only")
    parser.add_argument("--no-rows", action="store_true", help="summaries only")
    args = parser.parse_args()
    points = load_points()
    dense = [p for p in points if not p.spec.is_moe and not without_gqa_kernel(p)]
    moe = [p for p in points if p.spec.is_moe]
    apart = [p for p in points if without_gqa_kernel(p)]
    real = load_vllm_points()
    hopper = [p for p in dense if p.gpu.generation == "hopper"]
    real_dense = weighted([p for p in real if not p.spec.is_moe], len(hopper))
    hopper_moe = [p for p in moe if p.gpu.generation == "hopper"]
    real_moe = weighted([p for p in real if p.spec.is_moe], len(hopper_moe))
    if args.check:
        from infertriage.plan import params_for  # noqa: PLC0415

        params = {g: params_for(p.gpu) for p in points for g in [p.gpu.generation]}
    else:
        params = fit(points, [*real_dense, *real_moe])
    _print_params(params)
    print("\nreal vLLM on H100 under load (continuous batching, Little's-law batch):")
    real_errors = report([*real_dense, *real_moe], params, rows=True)
    errors = report(dense, params, rows=not args.no_rows)
    print("\nMoE (Mixtral-8x7B; fits η_expert only):")
    moe_errors = report(moe, params, rows=not args.no_rows)
    print("\napart, not fitted: Mistral-7B FP8-KV decode on Hopper, run without a GQA kernel:")
    apart_errors = report(apart, params, rows=False)
    held_out(params["hopper"])
    vidur_gemms(params["hopper"])
    if args.write:
        _write(params, errors, dense, moe_errors, apart_errors, real_errors)


if __name__ == "__main__":
    main()
