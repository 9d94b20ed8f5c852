"""plan.memory: parameter counts, weight bytes, KV bytes against published figures."""

from __future__ import annotations

import pytest

from infertriage.plan import (
    DTYPE_BYTES,
    kv_bytes_for_context,
    kv_bytes_per_token,
    kv_bytes_per_token_per_layer,
    linear_bytes_per_param,
    load_model,
    normalize_dtype,
    param_counts,
    weight_bytes,
)
from infertriage.schemas.errors import UserError


@pytest.mark.parametrize(
    ("preset", "total", "active", "rel"),
    [
        ("llama-3.1-8b", 8.03e9, 8.03e9, 0.005),
        ("llama-3.1-70b", 70.55e9, 70.55e9, 0.005),
        ("mixtral-8x7b", 46.7e9, 12.9e9, 0.01),
        ("deepseek-v3", 671e9, 37e9, 0.03),  # 671 B excludes the MTP module
        ("qwen3-30b-a3b", 30.5e9, 3.3e9, 0.03),
        ("qwen2.5-7b", 7.61e9, 7.61e9, 0.005),
        ("gemma-2-9b", 9.24e9, 9.24e9, 0.005),
    ],
)
def test_param_counts_match_published(preset: str, total: float, active: float, rel: float) -> None:
    counts = param_counts(load_model(preset))
    assert counts.total == pytest.approx(total, rel=rel)
    assert counts.active == pytest.approx(active, rel=rel)


@pytest.mark.parametrize(
    ("preset", "expected"),
    [
        ("llama-3.1-8b", 131_072),  # 32 layers · 2 · 8 heads · 128 · 2 B
        ("llama-3.1-70b", 327_680),
        ("deepseek-v3", 70_272),  # MLA: 61 · (512 + 64) · 2 B
        ("gemma-2-9b", 344_064),
    ],
)
def test_kv_bytes_per_token(preset: str, expected: int) -> None:
    assert kv_bytes_per_token(load_model(preset)) == expected


def test_fp8_kv_halves_the_cache() -> None:
    spec = load_model("llama-3.1-70b")
    assert kv_bytes_per_token(spec, "fp8") * 2 == kv_bytes_per_token(spec, "bf16")


def test_tp_divides_kv_heads_until_one_is_left_then_replicates() -> None:
    spec = load_model("llama-3.1-8b")  # 8 KV heads
    assert kv_bytes_per_token(spec, tp=2) == 131_072 // 2
    assert kv_bytes_per_token(spec, tp=8) == 131_072 // 8
    assert kv_bytes_per_token(spec, tp=16) == 32 * 2 * 1 * 128 * 2  # one head per GPU


def test_mla_latent_is_replicated_not_divided_by_tp() -> None:
    spec = load_model("deepseek-v3")
    assert kv_bytes_per_token(spec, tp=8) == kv_bytes_per_token(spec, tp=1) == 70_272


def test_sliding_window_layers_cap_the_context() -> None:
    spec = load_model("gemma-2-9b")  # 21 full layers, 21 sliding at 4,096
    per_layer = kv_bytes_per_token_per_layer(spec)
    assert kv_bytes_for_context(spec, 1000) == 42 * 1000 * per_layer
    assert kv_bytes_for_context(spec, 8192) == (21 * 8192 + 21 * 4096) * per_layer
    dense = load_model("llama-3.1-8b")
    assert kv_bytes_for_context(dense, 8192) == 8192 * kv_bytes_per_token(dense)


def test_int4_weights_with_scales_are_between_a_quarter_and_all_of_bf16() -> None:
    spec = load_model("llama-3.1-8b")
    bf16, int4 = weight_bytes(spec, "bf16"), weight_bytes(spec, "awq")
    assert bf16 / 4 < int4 < bf16
    assert weight_bytes(spec, "int4", group_size=32) > int4  # more groups, more scales
    assert linear_bytes_per_param("gptq") == pytest.approx(0.5 + 2.5 / 128)


def test_bf16_weights_are_two_bytes_a_parameter() -> None:
    spec = load_model("llama-3.1-8b")
    assert weight_bytes(spec, "bfloat16") == 2 * param_counts(spec).total
    assert weight_bytes(spec, "fp8") < weight_bytes(spec, "bf16")


def test_dtype_spellings() -> None:
    assert normalize_dtype("BFloat16") == "bf16"
    assert normalize_dtype("fp8-e4m3") == "fp8"
    assert normalize_dtype("AWQ") == "int4"
    assert DTYPE_BYTES["gptq"] == 0.5 and DTYPE_BYTES["fp32"] == 4
    with pytest.raises(UserError, match="unknown dtype"):
        normalize_dtype("fp7")


def test_kv_cache_dtype_below_eight_bits_is_refused() -> None:
    with pytest.raises(UserError, match="KV-cache dtype"):
        kv_bytes_per_token(load_model("llama-3.1-8b"), "int4")


def test_tp_below_one_is_a_user_error() -> None:
    with pytest.raises(UserError, match="tensor-parallel"):
        kv_bytes_per_token(load_model("llama-3.1-8b"), tp=0)
