"""plan.models: the HF config.json reader and the model catalogue."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from infertriage import plan
from infertriage.plan import ModelSpec, list_model_presets, load_model, model_from_hf_config
from infertriage.schemas.errors import UserError

_LLAMA_LIKE: dict[str, object] = {
    "model_type": "llama",
    "num_hidden_layers": 4,
    "hidden_size": 512,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "intermediate_size": 1024,
    "vocab_size": 1000,
}


def _cfg(**overrides: object) -> dict[str, object]:
    cfg = dict(_LLAMA_LIKE)
    for key, value in overrides.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    return cfg


def test_catalogue_has_the_promised_presets() -> None:
    wanted = {
        "llama-3.1-8b",
        "llama-3.1-70b",
        "llama-3.3-70b",
        "qwen2.5-7b",
        "qwen3-30b-a3b",
        "mixtral-8x7b",
        "deepseek-v3",
        "gemma-2-9b",
    }
    assert wanted <= set(list_model_presets())


def test_presets_are_case_insensitive() -> None:
    assert load_model("  LLaMA-3.1-8B ") == load_model("llama-3.1-8b")


def test_llama_3_1_8b_shape() -> None:
    spec = load_model("llama-3.1-8b")
    assert (spec.num_layers, spec.hidden_size, spec.num_attention_heads) == (32, 4096, 32)
    assert (spec.num_kv_heads, spec.head_dim, spec.intermediate_size) == (8, 128, 14336)
    assert not spec.tie_word_embeddings and not spec.is_moe and not spec.is_mla
    assert spec.sliding_window is None


def test_llama_3_3_70b_has_the_3_1_70b_architecture() -> None:
    a = dataclasses.replace(load_model("llama-3.3-70b"), name="x")
    b = dataclasses.replace(load_model("llama-3.1-70b"), name="x")
    assert a == b


def test_head_dim_is_read_when_present_and_derived_only_when_absent() -> None:
    assert model_from_hf_config(_cfg(head_dim=256), "t").head_dim == 256
    assert model_from_hf_config(_cfg(), "t").head_dim == 512 // 8


def test_missing_kv_heads_means_multi_head_attention() -> None:
    assert model_from_hf_config(_cfg(num_key_value_heads=None), "t").num_kv_heads == 8


def test_deepseek_v3_is_mla_with_dense_leading_layers() -> None:
    spec = load_model("deepseek-v3")
    assert spec.is_mla and spec.is_moe
    assert (spec.kv_lora_rank, spec.qk_rope_head_dim, spec.q_lora_rank) == (512, 64, 1536)
    assert spec.num_moe_layers == 61 - 3
    assert (spec.num_experts, spec.num_experts_per_tok) == (256, 8)
    assert spec.shared_expert_intermediate_size == 2048


def test_qwen3_moe_layer_selection() -> None:
    moe = _cfg(num_experts=16, num_experts_per_tok=2, moe_intermediate_size=128)
    assert model_from_hf_config(moe, "t").num_moe_layers == 4
    assert model_from_hf_config({**moe, "mlp_only_layers": [0, 3]}, "t").num_moe_layers == 2
    assert model_from_hf_config({**moe, "decoder_sparse_step": 2}, "t").num_moe_layers == 2
    assert load_model("qwen3-30b-a3b").num_moe_layers == 48


def test_mixtral_experts_use_intermediate_size() -> None:
    spec = load_model("mixtral-8x7b")
    assert (spec.num_experts, spec.num_experts_per_tok) == (8, 2)
    assert spec.moe_intermediate_size == 14336 and spec.shared_expert_intermediate_size == 0


def test_qwen2_moe_shared_expert_size() -> None:
    cfg = _cfg(num_experts=8, num_experts_per_tok=2, shared_expert_intermediate_size=2048)
    assert model_from_hf_config(cfg, "t").shared_expert_intermediate_size == 2048


def test_moe_without_top_k_is_a_user_error() -> None:
    with pytest.raises(UserError, match="num_experts_per_tok"):
        model_from_hf_config(_cfg(num_local_experts=8), "moe-x")


def test_gemma_2_alternates_sliding_layers_and_ties_embeddings() -> None:
    spec = load_model("gemma-2-9b")
    assert (spec.sliding_window, spec.num_sliding_layers, spec.num_layers) == (4096, 21, 42)
    assert spec.head_dim == 256 and spec.tie_word_embeddings


def test_sliding_layer_sources() -> None:
    types = ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]
    assert (
        model_from_hf_config(_cfg(sliding_window=64, layer_types=types), "t").num_sliding_layers
        == 3
    )
    gemma3 = _cfg(num_hidden_layers=12, sliding_window=1024, sliding_window_pattern=6)
    assert model_from_hf_config(gemma3, "t").num_sliding_layers == 10
    assert model_from_hf_config(_cfg(sliding_window=4096), "t").num_sliding_layers == 4
    off = _cfg(sliding_window=4096, use_sliding_window=False)
    assert model_from_hf_config(off, "t").sliding_window is None
    assert load_model("qwen2.5-7b").num_sliding_layers == 0


def test_layer_types_of_the_wrong_length_is_a_user_error() -> None:
    with pytest.raises(UserError, match="layer_types"):
        model_from_hf_config(_cfg(sliding_window=64, layer_types=["full_attention"]), "t")


def test_text_config_is_read_for_multimodal_configs() -> None:
    spec = model_from_hf_config({"model_type": "vlm", "text_config": _cfg()}, "vlm")
    assert spec.num_layers == 4


def test_missing_required_key_names_key_and_config() -> None:
    with pytest.raises(UserError) as err:
        model_from_hf_config(_cfg(num_hidden_layers=None), "llama-x")
    assert str(err.value) == "config llama-x is missing 'num_hidden_layers'."


def test_mistyped_value_is_a_user_error() -> None:
    with pytest.raises(UserError, match="'hidden_size'"):
        model_from_hf_config(_cfg(hidden_size="4096"), "t")


def test_load_from_file_and_directory(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(_cfg()), encoding="utf-8")
    from_dir = load_model(str(tmp_path))
    from_file = load_model(str(tmp_path / "config.json"))
    assert isinstance(from_dir, ModelSpec) and from_dir == from_file


def test_bad_json_is_a_user_error_naming_the_path(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(UserError, match=re.escape(str(path))):
        load_model(str(path))


def test_unknown_model_is_a_user_error() -> None:
    with pytest.raises(UserError, match=re.escape("llama-3.1-8b")):
        load_model("no-such-model")


def test_public_api_is_pinned() -> None:
    assert len(set(plan.__all__)) == len(plan.__all__)
    assert {
        "ModelSpec",
        "load_model",
        "get_gpu",
        "weight_bytes",
        "kv_bytes_per_token",
        "vllm_kv_cache",
        "prefill_time",
        "decode_step_time",
        "ttft_itl",
    } <= set(plan.__all__)
    assert all(hasattr(plan, name) for name in plan.__all__)
