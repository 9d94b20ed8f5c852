"""collect, level 2: the engines' metric tables, and which one a scrape needs.

The tables live with their engine (`infertriage.engines`); here they keep
their short names (`VLLM` is `engines.vllm.VLLM_METRICS`). Takes an
`Exposition`; `detect` names the engine from its metric prefixes (`vllm:`,
`sglang:`, `tgi_`, `nv_trt_llm_`/`trtllm_`, `nv_inference_`, `llamacpp:`)
and any GPU exporter in it (`DCGM_FI_`); `adapt_scrape` maps it
through each detected adapter into the vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

from infertriage.collect.adapters.base import (
    ENGINE_DOMAIN,
    Adapted,
    Adapter,
    Artefact,
    Availability,
    MetricStatus,
    NormHistogram,
    NormScalar,
    adapt,
)
from infertriage.collect.adapters.dcgm import DCGM
from infertriage.collect.parse import Exposition
from infertriage.engines.llamacpp import LLAMACPP_METRICS as LLAMACPP
from infertriage.engines.sglang import SGLANG_METRICS as SGLANG
from infertriage.engines.tgi import TGI_METRICS as TGI
from infertriage.engines.trtllm import TRITON_METRICS as TRITON
from infertriage.engines.trtllm import TRTLLM_TRITON_METRICS as TRTLLM_TRITON
from infertriage.engines.vllm import VLLM_METRICS as VLLM

__all__ = [
    "ADAPTERS",
    "DCGM",
    "ENGINE_ADAPTERS",
    "ENGINE_DOMAIN",
    "LLAMACPP",
    "SGLANG",
    "TGI",
    "TRITON",
    "TRTLLM_TRITON",
    "VLLM",
    "Adapted",
    "Adapter",
    "Artefact",
    "Availability",
    "Detection",
    "MetricStatus",
    "NormHistogram",
    "NormScalar",
    "adapt",
    "adapt_scrape",
    "detect",
    "get_adapter",
]

ENGINE_ADAPTERS: tuple[Adapter, ...] = (VLLM, SGLANG, TGI, TRTLLM_TRITON, TRITON, LLAMACPP)
EXPORTER_ADAPTERS: tuple[Adapter, ...] = (DCGM,)
ADAPTERS: tuple[Adapter, ...] = ENGINE_ADAPTERS + EXPORTER_ADAPTERS


@dataclass(frozen=True)
class Detection:
    """The engine a scrape came from (None: no known engine) and the exporters in it."""

    engine: Adapter | None
    exporters: tuple[Adapter, ...]
    num_names: dict[str, int]  # adapter → how many of the scrape's sample names it claims

    @property
    def adapters(self) -> tuple[Adapter, ...]:
        return ((self.engine,) if self.engine else ()) + self.exporters


def _claimed(exposition: Exposition, adapter: Adapter) -> int:
    return sum(1 for name in exposition.names if name.startswith(adapter.prefixes))


def detect(exposition: Exposition) -> Detection:
    """The engine whose prefixes claim most names (TensorRT-LLM beats plain Triton)."""
    counts = {adapter.engine: _claimed(exposition, adapter) for adapter in ADAPTERS}
    candidates = [a for a in ENGINE_ADAPTERS if counts[a.engine] > 0]
    if TRTLLM_TRITON in candidates:
        candidates.remove(TRITON)
    engine = max(candidates, key=lambda a: counts[a.engine], default=None)
    exporters = tuple(a for a in EXPORTER_ADAPTERS if counts[a.engine] > 0)
    return Detection(engine, exporters, counts)


def get_adapter(engine: str) -> Adapter:
    for adapter in ADAPTERS:
        if adapter.engine == engine:
            return adapter
    raise KeyError(engine)


def adapt_scrape(exposition: Exposition, detection: Detection | None = None) -> tuple[Adapted, ...]:
    """Map a scrape through its engine's adapter and through every exporter found in it."""
    detection = detection or detect(exposition)
    return tuple(adapt(exposition, adapter) for adapter in detection.adapters)
