"""plan, level 1: parameter counts, weight bytes and KV-cache bytes.

Takes a `ModelSpec`, a weight or KV dtype and a tensor-parallel degree; gives
parameter counts (total, and active per token), checkpoint weight bytes
(quantised int4/int8 checkpoints with their per-group scales and zero points,
embeddings and lm_head left in BF16 as the usual tools leave them) and KV
bytes per GPU: per token, per layer, and for a whole context with
sliding-window layers capped at their window.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from infertriage.plan.models import ModelSpec
from infertriage.schemas.errors import UserError

__all__ = [
    "DTYPE_ALIASES",
    "DTYPE_BYTES",
    "ParamBreakdown",
    "ParamCounts",
    "kv_bytes_for_context",
    "kv_bytes_per_token",
    "kv_bytes_per_token_per_layer",
    "linear_bytes_per_param",
    "normalize_dtype",
    "param_breakdown",
    "param_counts",
    "unquantized_bytes_per_param",
    "weight_bytes",
]

_CANONICAL_BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4}

DTYPE_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        **{name: name for name in _CANONICAL_BITS},
        "float32": "fp32",
        "float": "fp32",
        "f32": "fp32",
        "auto": "bf16",
        "bfloat16": "bf16",
        "float16": "fp16",
        "half": "fp16",
        "f16": "fp16",
        "float8": "fp8",
        "fp8_e4m3": "fp8",
        "fp8_e4m3fn": "fp8",
        "fp8_e5m2": "fp8",
        "e4m3": "fp8",
        "fp8_dynamic": "fp8",
        "w8a8_fp8": "fp8",
        "w8a8": "int8",
        "w8a16": "int8",
        "int8_w8a8": "int8",
        "smoothquant": "int8",
        "w4a16": "int4",
        "awq": "int4",
        "awq_marlin": "int4",
        "gptq": "int4",
        "gptq_marlin": "int4",
        "marlin": "int4",
    }
)
"""Every accepted dtype spelling (lower case, `_` for `-`) → its canonical name."""

DTYPE_BYTES: Mapping[str, float] = MappingProxyType(
    {alias: _CANONICAL_BITS[canonical] / 8 for alias, canonical in DTYPE_ALIASES.items()}
)
"""Bytes per element of each accepted dtype name, scales and zero points not included."""

_SCALE_BYTES = 2  # one FP16 scale per group
_ZERO_POINT_BITS = 4  # AWQ / GPTQ pack one 4-bit zero point per group


def normalize_dtype(name: str) -> str:
    """The canonical name (`fp32`, `bf16`, `fp16`, `fp8`, `int8`, `int4`) of a dtype spelling."""
    key = name.strip().lower().replace("-", "_")
    if key not in DTYPE_ALIASES:
        known = ", ".join(sorted(_CANONICAL_BITS))
        raise UserError(f"unknown dtype {name!r}; use one of {known} (or awq, gptq, fp8_e4m3 …).")
    return DTYPE_ALIASES[key]


def linear_bytes_per_param(dtype: str, *, group_size: int = 128) -> float:
    """Bytes per weight of a transformer-layer matrix in `dtype`, quantisation scales included."""
    canonical = normalize_dtype(dtype)
    if group_size <= 0:
        raise UserError(f"quantisation group size must be positive, not {group_size}.")
    base = _CANONICAL_BITS[canonical] / 8
    if canonical == "int4":
        return base + (_SCALE_BYTES + _ZERO_POINT_BITS / 8) / group_size
    if canonical == "int8":
        return base + _SCALE_BYTES / group_size
    return base


def unquantized_bytes_per_param(dtype: str) -> float:
    """Bytes per weight of what quantisers leave alone (embeddings, lm_head, norms, routers)."""
    bits = _CANONICAL_BITS[normalize_dtype(dtype)]
    return max(bits, 16) / 8


# ---------------------------------------------------------------------------- parameters


@dataclass(frozen=True, slots=True)
class ParamBreakdown:
    """Parameter counts by part, summed over all layers except `expert` (one expert, one layer)."""

    embedding: int
    lm_head: int  # zero when tied to the embedding
    attention: int
    dense_mlp: int
    shared_experts: int
    routers: int
    norms: int
    expert: int
    num_experts: int
    num_experts_per_tok: int
    num_moe_layers: int

    @property
    def linear(self) -> int:
        """Quantisable layer matrices other than the routed experts."""
        return self.attention + self.dense_mlp + self.shared_experts

    @property
    def routed_experts(self) -> int:
        return self.expert * self.num_experts * self.num_moe_layers

    @property
    def active_routed_experts(self) -> int:
        return self.expert * self.num_experts_per_tok * self.num_moe_layers


@dataclass(frozen=True, slots=True)
class ParamCounts:
    """Parameters in all; and active per token (top-k routed experts plus the shared ones)."""

    total: int
    active: int


def _attention_params(spec: ModelSpec) -> int:
    hidden, heads = spec.hidden_size, spec.num_attention_heads
    if spec.is_mla:
        qk_dim = spec.qk_nope_head_dim + spec.qk_rope_head_dim
        if spec.q_lora_rank:
            q = hidden * spec.q_lora_rank + spec.q_lora_rank + spec.q_lora_rank * heads * qk_dim
        else:
            q = hidden * heads * qk_dim
        kv_a = hidden * (spec.kv_lora_rank + spec.qk_rope_head_dim) + spec.kv_lora_rank
        kv_b = spec.kv_lora_rank * heads * (spec.qk_nope_head_dim + spec.v_head_dim)
        out = heads * spec.v_head_dim * hidden
        return q + kv_a + kv_b + out
    q_and_out = 2 * hidden * heads * spec.head_dim
    k_and_v = 2 * hidden * spec.num_kv_heads * spec.head_dim
    return q_and_out + k_and_v


def param_breakdown(spec: ModelSpec) -> ParamBreakdown:
    """The model's parameters by part (biases ignored: well under 0.1 % in every family)."""
    hidden = spec.hidden_size
    embedding = spec.vocab_size * hidden
    moe_layers = spec.num_moe_layers if spec.is_moe else 0
    return ParamBreakdown(
        embedding=embedding,
        lm_head=0 if spec.tie_word_embeddings else embedding,
        attention=_attention_params(spec) * spec.num_layers,
        dense_mlp=3 * hidden * spec.intermediate_size * (spec.num_layers - moe_layers),
        shared_experts=3 * hidden * spec.shared_expert_intermediate_size * moe_layers,
        routers=hidden * spec.num_experts * moe_layers,
        norms=(2 * spec.num_layers + 1) * hidden,
        expert=3 * hidden * spec.moe_intermediate_size if moe_layers else 0,
        num_experts=spec.num_experts if moe_layers else 0,
        num_experts_per_tok=spec.num_experts_per_tok if moe_layers else 0,
        num_moe_layers=moe_layers,
    )


def param_counts(spec: ModelSpec) -> ParamCounts:
    """Total parameters, and those one token touches (both embedding tables counted)."""
    parts = param_breakdown(spec)
    shared = parts.embedding + parts.lm_head + parts.linear + parts.routers + parts.norms
    return ParamCounts(
        total=shared + parts.routed_experts, active=shared + parts.active_routed_experts
    )


def weight_bytes(spec: ModelSpec, dtype: str, *, group_size: int = 128) -> int:
    """Checkpoint weight bytes in `dtype`; below 16 bits only layer matrices are quantised."""
    parts = param_breakdown(spec)
    linear = (parts.linear + parts.routed_experts) * linear_bytes_per_param(
        dtype, group_size=group_size
    )
    kept = (parts.embedding + parts.lm_head + parts.routers + parts.norms) * (
        unquantized_bytes_per_param(dtype)
    )
    return round(linear + kept)


# ---------------------------------------------------------------------------- KV cache


def _kv_element_bytes(kv_dtype: str) -> int:
    bits = _CANONICAL_BITS[normalize_dtype(kv_dtype)]
    if bits < 8:
        raise UserError(f"KV-cache dtype {kv_dtype!r} is not supported; use bf16, fp16 or fp8.")
    return bits // 8


def _check_tp(tp: int) -> None:
    if tp < 1:
        raise UserError(f"tensor-parallel size must be 1 or more, not {tp}.")


def kv_bytes_per_token_per_layer(spec: ModelSpec, kv_dtype: str = "bf16", tp: int = 1) -> int:
    """KV bytes one token adds to one attention layer on one GPU.

    GQA/MHA: K and V for this GPU's KV heads, `max(1, n_kv // tp)`, since heads are replicated
    once TP exceeds their count. MLA: the compressed latent plus the RoPE key, replicated on
    every TP rank, so not divided.
    """
    _check_tp(tp)
    element = _kv_element_bytes(kv_dtype)
    if spec.is_mla:
        return (spec.kv_lora_rank + spec.qk_rope_head_dim) * element
    kv_heads_per_gpu = max(1, spec.num_kv_heads // tp)
    return 2 * kv_heads_per_gpu * spec.head_dim * element


def kv_bytes_per_token(spec: ModelSpec, kv_dtype: str = "bf16", tp: int = 1) -> int:
    """KV bytes one token adds on one GPU across all layers (sliding windows not applied)."""
    return spec.num_layers * kv_bytes_per_token_per_layer(spec, kv_dtype, tp)


def kv_bytes_for_context(
    spec: ModelSpec, context_tokens: int, kv_dtype: str = "bf16", tp: int = 1
) -> int:
    """KV bytes one sequence of `context_tokens` holds on one GPU.

    Sliding-window layers hold only `min(context_tokens, window)` tokens.
    """
    if context_tokens < 0:
        raise UserError(f"context length must be zero or more, not {context_tokens}.")
    per_layer = kv_bytes_per_token_per_layer(spec, kv_dtype, tp)
    full_tokens = spec.num_full_attention_layers * context_tokens
    sliding_tokens = 0
    if spec.sliding_window is not None:
        sliding_tokens = spec.num_sliding_layers * min(context_tokens, spec.sliding_window)
    return per_layer * (full_tokens + sliding_tokens)
