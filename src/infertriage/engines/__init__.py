"""engines, level 0½: one adapter per inference engine, as pure data.

Takes nothing; gives `ENGINES` (vLLM, llama.cpp, SGLang, TGI, TensorRT-LLM:
the order in which their endpoints and `/v1/models` card fields are tried),
`engine_of` (the adapter of a name `collect.detect` gives), `knob_flag` (the
flag advice names for a setting) and the shared OpenAI-compatible facts
(`read_model_list`). Every engine-specific fact — metric names, config
endpoints, context and seat limits, log formats, knob names — lives in one
module here; `collect`, `loadgen`, `analyze` and `diagnose` read them.
"""

from __future__ import annotations

from collections.abc import Mapping

from infertriage.engines.base import (
    Endpoint,
    EngineAdapter,
    EventKind,
    Knob,
    LogEvent,
    LogFormat,
    SaidLimit,
    SpecLine,
    StatsLine,
    as_int,
    positive,
    typed_label,
)
from infertriage.engines.llamacpp import LLAMACPP
from infertriage.engines.metrics import (
    ENGINE_DOMAIN,
    MetricMap,
    MetricTable,
    Product,
    Source,
    metric,
)
from infertriage.engines.openai import ModelList, read_model_list
from infertriage.engines.sglang import SGLANG
from infertriage.engines.tgi import TGI
from infertriage.engines.trtllm import TRTLLM
from infertriage.engines.vllm import VLLM

__all__ = [
    "ENGINES",
    "ENGINE_DOMAIN",
    "LLAMACPP",
    "SGLANG",
    "TGI",
    "TRTLLM",
    "VLLM",
    "Endpoint",
    "EngineAdapter",
    "EventKind",
    "Knob",
    "LogEvent",
    "LogFormat",
    "MetricMap",
    "MetricTable",
    "ModelList",
    "Product",
    "SaidLimit",
    "Source",
    "SpecLine",
    "StatsLine",
    "as_int",
    "engine_of",
    "knob_flag",
    "limit_from_card",
    "metric",
    "positive",
    "read_model_list",
    "typed_label",
]

ENGINES: tuple[EngineAdapter, ...] = (VLLM, LLAMACPP, SGLANG, TGI, TRTLLM)


def engine_of(name: str | None) -> EngineAdapter | None:
    """The adapter of an engine as detection names it (`vllm`, `triton`, …); None if unknown."""
    return next((e for e in ENGINES if name is not None and name in e.names), None)


def knob_flag(engine: str | None, knob: Knob) -> str:
    """The engine's flag for `knob`; vLLM's where the engine is unknown or has no such flag."""
    adapter = engine_of(engine)
    if adapter is not None and knob in adapter.knobs:
        return adapter.knobs[knob]
    return VLLM.knobs[knob]


def limit_from_card(card: object) -> SaidLimit | None:
    """The context length one `/v1/models` card says, by the first engine whose field it has."""
    if not isinstance(card, Mapping):
        return None
    for engine in ENGINES:
        found = engine.read_card(card) if engine.read_card is not None else None
        if found is not None:
            return found
    return None
