"""collect, level 2: the engines' metric tables, and which one a scrape needs.

The tables live with their engine (`infertriage.engines`: each adapter's
`metrics`, read through `engines.metric_tables()` when a scrape is detected,
so an engine added to the registry is detected here). Takes an
`Exposition`; `detect` names the engine from its metric prefixes (`vllm:`,
`sglang:`, `tgi_`, `nv_trt_llm_`/`trtllm_`, `nv_inference_`, `llamacpp:`)
and any GPU exporter in it (`DCGM_FI_`); `adapt_scrape` maps it
through each detected adapter into the vocabulary.
"""

from __future__ import annotations

from collections.abc import Mapping
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
from infertriage.engines import metric_tables, registered

__all__ = [
    "ADAPTERS",
    "DCGM",
    "ENGINE_ADAPTERS",
    "ENGINE_DOMAIN",
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
    "pick_engine",
]

EXPORTER_ADAPTERS: tuple[Adapter, ...] = (DCGM,)
# the tables as the registry gives them when this is imported (for listings); detection
# reads `engines.metric_tables()` as it runs
ENGINE_ADAPTERS: tuple[Adapter, ...] = metric_tables()
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


def pick_engine(counts: Mapping[str, int]) -> Adapter | None:
    """The table whose names are most of a scrape's, from how many each table claims (by its
    `engine`). An engine's own table beats its variants (TensorRT-LLM's beats plain Triton's):
    of each engine's tables only the first that claims a name stands."""
    candidates = [
        next((t for t in engine.metrics if counts.get(t.engine, 0) > 0), None)
        for engine in registered()
    ]
    standing = [t for t in candidates if t is not None]  # a tie: the registry's first
    return max(standing, key=lambda t: counts[t.engine], default=None)


def detect(exposition: Exposition) -> Detection:
    """The engine whose prefixes claim most names (TensorRT-LLM beats plain Triton)."""
    tables = metric_tables() + EXPORTER_ADAPTERS
    counts = {adapter.engine: _claimed(exposition, adapter) for adapter in tables}
    exporters = tuple(a for a in EXPORTER_ADAPTERS if counts[a.engine] > 0)
    return Detection(pick_engine(counts), exporters, counts)


def get_adapter(engine: str) -> Adapter:
    for adapter in metric_tables() + EXPORTER_ADAPTERS:
        if adapter.engine == engine:
            return adapter
    raise KeyError(engine)


def adapt_scrape(exposition: Exposition, detection: Detection | None = None) -> tuple[Adapted, ...]:
    """Map a scrape through its engine's adapter and through every exporter found in it."""
    detection = detection or detect(exposition)
    return tuple(adapt(exposition, adapter) for adapter in detection.adapters)
