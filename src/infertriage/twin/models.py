"""twin, level 2: the models a scenario may name, beyond the `plan` catalogue.

Takes a scenario's `model` value (a `plan` preset, a twin-only preset, or a path to
a Hugging Face config.json, relative paths taken from the scenario's folder); gives
the `ModelSpec` from `plan`. The twin-only presets are small models that the
launch-bound and front-end-bound scenarios need (a 0.5 B model is the classic case
of a GPU waiting on the host); they are read by `plan.model_from_hf_config`, so
`plan` stays the one reader of model shapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from infertriage.plan import ModelSpec, list_model_presets, load_model, model_from_hf_config
from infertriage.schemas import UserError
from infertriage.schemas.inputs import why_missing

__all__ = ["TWIN_MODEL_PRESETS", "resolve_model"]

# Qwen/Qwen2.5-0.5B-Instruct config.json (the keys the shape reader uses).
_QWEN2_5_0_5B: Mapping[str, object] = MappingProxyType(
    {
        "architectures": ["Qwen2ForCausalLM"],
        "hidden_size": 896,
        "intermediate_size": 4864,
        "max_position_embeddings": 32768,
        "max_window_layers": 21,
        "model_type": "qwen2",
        "num_attention_heads": 14,
        "num_hidden_layers": 24,
        "num_key_value_heads": 2,
        "sliding_window": 32768,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "use_sliding_window": False,
        "vocab_size": 151936,
    }
)

TWIN_MODEL_PRESETS: Mapping[str, Mapping[str, object]] = MappingProxyType(
    {"qwen2.5-0.5b": _QWEN2_5_0_5B}
)


def resolve_model(name_or_path: str, base_dir: Path | None = None) -> ModelSpec:
    """The `ModelSpec` a scenario's `model` names; raises `plan`'s `UserError` when none."""
    key = name_or_path.strip().lower()
    if key in list_model_presets():
        return load_model(key)
    if key in TWIN_MODEL_PRESETS:
        return model_from_hf_config(TWIN_MODEL_PRESETS[key], key)
    path = Path(name_or_path).expanduser()
    if base_dir is not None and not path.is_absolute():
        path = base_dir / path
    if not path.exists() and path.is_symlink():  # a link that leads nowhere: why
        raise UserError(f"model {path} {why_missing(path)}.")
    if not path.exists():
        presets = ", ".join(sorted([*list_model_presets(), *TWIN_MODEL_PRESETS]))
        raise UserError(
            f"model {name_or_path!r} is neither a preset ({presets}) nor a config.json on disk."
        )
    return load_model(str(path))
