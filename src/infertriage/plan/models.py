"""plan, level 1: a model's shape, read from a Hugging Face `config.json`.

Takes a catalogue preset name (`llama-3.1-8b`), a path to a config.json or to
a directory holding one, or an already-parsed mapping; gives a frozen
`ModelSpec` with the dimensions the capacity and roofline models need:
attention (MHA, GQA, DeepSeek's MLA), the MLP (dense, or mixture-of-experts
with shared experts and dense leading layers), sliding-window layers and
embedding tying. The MLP is taken as gated (SwiGLU/GeGLU: three matrices),
which every catalogued family uses. DeepSeek's multi-token-prediction module
(`num_nextn_predict_layers`) is not part of the served model and is left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from infertriage.schemas.errors import UserError
from infertriage.schemas.inputs import read_small_text, why_missing

__all__ = ["ModelSpec", "list_model_presets", "load_model", "model_from_hf_config"]

# Config classes whose `tie_word_embeddings` default is True, for configs that omit the key
# (Google's Gemma configs do). Every other family we read defaults to untied.
_TIED_BY_DEFAULT = frozenset({"gemma", "gemma2", "gemma3", "gemma3_text"})
_EXPERT_COUNT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
_MAX_CONFIG_BYTES = 1024 * 1024  # config.json files are a few KiB; a multimodal one tens


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """The shape of one decoder-only transformer; sizes are element counts, not bytes."""

    name: str
    model_type: str
    num_layers: int
    hidden_size: int
    vocab_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int | None = None
    # Mixture of experts: zero experts means a dense model.
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    num_moe_layers: int = 0
    # Multi-head latent attention (DeepSeek-V2/V3): kv_lora_rank > 0 turns it on.
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    # Sliding-window attention: that many layers keep only the last `sliding_window` tokens.
    sliding_window: int | None = None
    num_sliding_layers: int = 0

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0 and self.num_moe_layers > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def num_dense_layers(self) -> int:
        return self.num_layers - self.num_moe_layers

    @property
    def num_full_attention_layers(self) -> int:
        return self.num_layers - self.num_sliding_layers


# ---------------------------------------------------------------------------- typed reads


def _typed_int(cfg: Mapping[str, object], key: str, name: str) -> int | None:
    value = cfg.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"config {name} has {key!r} = {value!r}, expected an integer.")
    return value


def _require(cfg: Mapping[str, object], key: str, name: str) -> int:
    value = _typed_int(cfg, key, name)
    if value is None:
        raise UserError(f"config {name} is missing {key!r}.")
    if value <= 0:
        raise UserError(f"config {name} has {key!r} = {value}, expected a positive integer.")
    return value


def _optional(cfg: Mapping[str, object], key: str, name: str, default: int = 0) -> int:
    value = _typed_int(cfg, key, name)
    if value is None:
        return default
    if value < 0:
        raise UserError(f"config {name} has {key!r} = {value}, expected zero or more.")
    return value


def _int_list(cfg: Mapping[str, object], key: str, name: str) -> list[int]:
    value = cfg.get(key)
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise UserError(f"config {name} has {key!r} = {value!r}, expected a list of integers.")
    if not all(isinstance(item, int) and not isinstance(item, bool) for item in value):
        raise UserError(f"config {name} has {key!r} = {value!r}, expected a list of integers.")
    return [int(item) for item in value]


# ---------------------------------------------------------------------------- sections


@dataclass(frozen=True, slots=True)
class _Moe:
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    num_moe_layers: int = 0


def _count_moe_layers(cfg: Mapping[str, object], name: str, num_layers: int) -> int:
    # DeepSeek: the first k layers stay dense, then every `moe_layer_freq`-th layer is MoE.
    # Qwen-MoE: layers in `mlp_only_layers` are dense and `decoder_sparse_step` spaces the rest.
    first_dense = _optional(cfg, "first_k_dense_replace", name)
    freq = max(1, _optional(cfg, "moe_layer_freq", name, 1))
    dense_only = set(_int_list(cfg, "mlp_only_layers", name))
    step = max(1, _optional(cfg, "decoder_sparse_step", name, 1))
    return sum(
        layer >= first_dense
        and layer % freq == 0
        and layer not in dense_only
        and (layer + 1) % step == 0
        for layer in range(num_layers)
    )


def _read_moe(cfg: Mapping[str, object], name: str, num_layers: int, dense_inter: int) -> _Moe:
    num_experts = 0
    for key in _EXPERT_COUNT_KEYS:
        num_experts = _optional(cfg, key, name)
        if num_experts:
            break
    if num_experts == 0:
        return _Moe()
    top_k = _require(cfg, "num_experts_per_tok", name)
    expert_inter = _optional(cfg, "moe_intermediate_size", name) or dense_inter
    num_shared = _optional(cfg, "n_shared_experts", name)
    if num_shared:
        shared_inter = num_shared * expert_inter
    else:
        shared_inter = _optional(cfg, "shared_expert_intermediate_size", name)
    num_moe_layers = _count_moe_layers(cfg, name, num_layers)
    return _Moe(num_experts, top_k, expert_inter, shared_inter, num_moe_layers)


def _count_sliding(cfg: Mapping[str, object], name: str, num_layers: int) -> int:
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, Sequence) and not isinstance(layer_types, str):
        if len(layer_types) != num_layers:
            raise UserError(
                f"config {name} lists {len(layer_types)} 'layer_types' for {num_layers} layers."
            )
        return sum(kind == "sliding_attention" for kind in layer_types)
    pattern = _optional(cfg, "sliding_window_pattern", name) or _optional(
        cfg, "_sliding_window_pattern", name
    )
    if not pattern and cfg.get("model_type") == "gemma2":
        pattern = 2  # Gemma-2 alternates: even layers slide, odd layers see everything.
    if pattern:
        return sum((layer + 1) % pattern != 0 for layer in range(num_layers))
    if "max_window_layers" in cfg:
        # Qwen2: the layers from `max_window_layers` on use the window.
        return max(0, num_layers - _optional(cfg, "max_window_layers", name))
    return num_layers  # Mistral-style: every layer slides.


def _read_sliding(cfg: Mapping[str, object], name: str, num_layers: int) -> tuple[int | None, int]:
    window = _optional(cfg, "sliding_window", name)
    if window == 0 or cfg.get("use_sliding_window") is False:
        return None, 0
    num_sliding = _count_sliding(cfg, name, num_layers)
    return (window, num_sliding) if num_sliding else (None, 0)


def _read_tied(cfg: Mapping[str, object], name: str, model_type: str) -> bool:
    value = cfg.get("tie_word_embeddings")
    if value is None:
        return model_type in _TIED_BY_DEFAULT
    if not isinstance(value, bool):
        raise UserError(f"config {name} has 'tie_word_embeddings' = {value!r}, expected a boolean.")
    return value


def _text_section(cfg: Mapping[str, object]) -> Mapping[str, object]:
    # Multimodal configs (Gemma-3, Llama-4, Qwen-VL) nest the language model under text_config.
    text = cfg.get("text_config")
    if "num_hidden_layers" not in cfg and isinstance(text, Mapping):
        return {str(key): value for key, value in text.items()}
    return cfg


# ---------------------------------------------------------------------------- the reader


def model_from_hf_config(cfg: Mapping[str, object], name: str) -> ModelSpec:
    """Read a Hugging Face `config.json` mapping; `name` names the config in errors and the spec.

    Raises `UserError` naming the missing or mistyped key.
    """
    cfg = _text_section(cfg)
    model_type = str(cfg.get("model_type") or "unknown")
    num_layers = _require(cfg, "num_hidden_layers", name)
    hidden = _require(cfg, "hidden_size", name)
    num_heads = _require(cfg, "num_attention_heads", name)
    num_kv_heads = _optional(cfg, "num_key_value_heads", name) or num_heads
    kv_lora_rank = _optional(cfg, "kv_lora_rank", name)
    qk_rope = _optional(cfg, "qk_rope_head_dim", name)
    qk_nope = _optional(cfg, "qk_nope_head_dim", name)
    head_dim = _optional(cfg, "head_dim", name)
    if not head_dim:
        head_dim = qk_nope + qk_rope if kv_lora_rank else hidden // num_heads
    dense_inter = _require(cfg, "intermediate_size", name)
    moe = _read_moe(cfg, name, num_layers, dense_inter)
    window, num_sliding = _read_sliding(cfg, name, num_layers)
    return ModelSpec(
        name=name,
        model_type=model_type,
        num_layers=num_layers,
        hidden_size=hidden,
        vocab_size=_require(cfg, "vocab_size", name),
        num_attention_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_dim=head_dim,
        intermediate_size=dense_inter,
        tie_word_embeddings=_read_tied(cfg, name, model_type),
        max_position_embeddings=_optional(cfg, "max_position_embeddings", name) or None,
        num_experts=moe.num_experts,
        num_experts_per_tok=moe.num_experts_per_tok,
        moe_intermediate_size=moe.moe_intermediate_size,
        shared_expert_intermediate_size=moe.shared_expert_intermediate_size,
        num_moe_layers=moe.num_moe_layers,
        kv_lora_rank=kv_lora_rank,
        q_lora_rank=_optional(cfg, "q_lora_rank", name),
        qk_rope_head_dim=qk_rope,
        qk_nope_head_dim=qk_nope,
        v_head_dim=_optional(cfg, "v_head_dim", name) or (head_dim if kv_lora_rank else 0),
        sliding_window=window,
        num_sliding_layers=num_sliding,
    )


@cache
def _catalog() -> dict[str, Mapping[str, object]]:
    text = resources.files("infertriage.plan").joinpath("data/models.json").read_text("utf-8")
    raw = json.loads(text)
    return {str(key).lower(): entry["config"] for key, entry in raw.items()}


def list_model_presets() -> list[str]:
    """The catalogue's preset names, sorted."""
    return sorted(_catalog())


def _read_config_file(path: Path) -> Mapping[str, object]:
    why = "a model's config.json takes a few KiB, so it is likely the wrong file."
    text = read_small_text(path, f"model config {path}", _MAX_CONFIG_BYTES, why)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"model config {path} is not valid JSON ({err}).") from err
    except RecursionError:  # `[[[[…` nested deeper than Python's stack
        raise UserError(f"model config {path} nests too deep to be a config.json.") from None
    if not isinstance(data, dict):
        raise UserError(f"model config {path} is not a JSON object.")
    return data


def load_model(name_or_path: str) -> ModelSpec:
    """A preset (case-insensitive) or a path to a config.json, or to a directory holding one."""
    key = name_or_path.strip().lower()
    presets = _catalog()
    if key in presets:
        return model_from_hf_config(presets[key], key)
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        path = path / "config.json"
    if not path.exists() and path.is_symlink():  # a link that leads nowhere: why
        raise UserError(f"model {path} {why_missing(path)}.")
    if not path.is_file():
        raise UserError(
            f"model {name_or_path!r} is neither a preset ({', '.join(list_model_presets())}) "
            "nor a config.json on disk."
        )
    return model_from_hf_config(_read_config_file(path), str(path))
