"""engines, level 0½: one adapter per inference engine, as pure data.

Takes nothing; gives `ENGINES` (vLLM, llama.cpp, SGLang, TGI, TensorRT-LLM:
the order in which their endpoints, `/v1/models` card fields and `/tokenize`
forms are tried), `engine_of` (the adapter of a name `collect.detect` gives),
`knob_flag` (the flag advice names for a setting) and the shared
OpenAI-compatible facts (`read_model_list`). Every engine-specific fact —
metric names, config endpoints, context and seat limits, log formats,
`/tokenize` forms, knob names — lives in one module here; `collect`,
`loadgen`, `analyze`, `diagnose`, `report` and `api` read them.

`ENGINES` is the only list of engines: adding one is its module and one entry
there. Every reader asks for it when it runs — `registered()`,
`engine_choices()`, `metric_tables()`, `tokenize_forms()`, `log_title()` —
so a test that puts a fake adapter in `ENGINES` sees it everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping

from infertriage.engines.base import (
    AttentionFallback,
    Endpoint,
    EngineAdapter,
    EventKind,
    HostRoles,
    Knob,
    LogEvent,
    LogFormat,
    MetricLookup,
    SaidLimit,
    SpecLine,
    StatsLine,
    TokenizeForm,
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
    "AttentionFallback",
    "Endpoint",
    "EngineAdapter",
    "EventKind",
    "HostRoles",
    "Knob",
    "LogEvent",
    "LogFormat",
    "MetricLookup",
    "MetricMap",
    "MetricTable",
    "ModelList",
    "Product",
    "SaidLimit",
    "Source",
    "SpecLine",
    "StatsLine",
    "TokenizeForm",
    "as_int",
    "engine_choices",
    "engine_of",
    "host_role",
    "host_roles",
    "knob_flag",
    "limit_from_card",
    "log_title",
    "metric",
    "metric_tables",
    "positive",
    "read_model_list",
    "registered",
    "tokenize_forms",
    "typed_label",
]

ENGINES: tuple[EngineAdapter, ...] = (VLLM, LLAMACPP, SGLANG, TGI, TRTLLM)


def registered() -> tuple[EngineAdapter, ...]:
    """Every engine's adapter, in `ENGINES`' order, as it stands now (a test may add one)."""
    return ENGINES


def engine_of(name: str | None) -> EngineAdapter | None:
    """The adapter of an engine as detection names it (`vllm`, `triton`, …); None if unknown."""
    return next((e for e in registered() if name is not None and name in e.names), None)


def host_roles() -> HostRoles:
    """Every engine's process and thread names by role, together: a host sample does not say
    which engine it came from, and no engine's API-server name is another's engine core."""
    engines = registered()
    return HostRoles(
        api_server=tuple(word for e in engines for word in e.host_roles.api_server),
        engine_core=tuple(word for e in engines for word in e.host_roles.engine_core),
        worker=tuple(word for e in engines for word in e.host_roles.worker),
    )


_TORCH_THREADS = ("gloo", "nccl")  # PyTorch's collective threads: model execution, any engine


def host_role(thread: str, *, child: bool) -> str:
    """ "frontend" (the API server), "engine" (the engine core) or "worker" (model execution):
    what a server's thread does, from its name (`host_roles`) and whether its process is a
    child of the server's. A thread of the server's own process that no engine names is the
    API server's (the one serving HTTP); one of a child process is model execution's unless
    its name says otherwise (vLLM's `VLLM::APIServer_N`, SGLang's detokenizer)."""
    name, roles = thread.lower(), host_roles()
    if any(word in name for word in roles.api_server):
        return "frontend"
    if any(word in name for word in roles.engine_core):
        return "engine"
    if child or any(word in name for word in (*roles.worker, *_TORCH_THREADS)):
        return "worker"
    return "frontend"


def engine_choices() -> dict[str, EngineAdapter]:
    """Each engine as `monitor-config --engine` names it (`EngineAdapter.choice`) → its adapter."""
    return {e.choice: e for e in registered()}


def metric_tables() -> tuple[MetricTable, ...]:
    """Every engine's metric tables: each engine's own first, then its variants."""
    return tuple(table for e in registered() for table in e.metrics)


def tokenize_forms() -> tuple[TokenizeForm, ...]:
    """The `/tokenize` forms of the engines that have one, in the order they are tried."""
    return tuple(e.tokenize for e in registered() if e.tokenize is not None)


def log_title(line_engine: str | None, engine: str | None = None) -> str | None:
    """The title of the engine of a log: the variant its stats lines name (`StatsLine.engine`:
    vLLM V0's) where its adapter titles one, else `engine`'s adapter (given, or the lines'
    name as detection gives it); None if unknown."""
    for adapter in registered():
        titles = adapter.log.variant_titles if adapter.log is not None else {}
        if line_engine is not None and line_engine in titles:
            return titles[line_engine]
    found = engine_of(engine or line_engine)
    return found.title if found is not None else None


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
    for engine in registered():
        found = engine.read_card(card) if engine.read_card is not None else None
        if found is not None:
            return found
    return None
