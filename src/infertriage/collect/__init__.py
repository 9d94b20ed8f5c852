"""collect, level 2: evidence from a live server, its GPUs and its host.

Scrapes `/metrics` (any of vLLM, SGLang, TGI, TensorRT-LLM/Triton,
llama.cpp, and dcgm-exporter) into the normalised vocabulary of `schemas`,
marks every name present, absent or unsupported, notices server restarts,
reads the server's own configuration, samples the host process tree and
local GPUs (NVML), snapshots the environment, checks readiness, and queries
a Prometheus server for fleets. Imports `schemas` and level-1 `analyze` only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infertriage.schemas.lazy import lazy_exports

if TYPE_CHECKING:
    from infertriage.collect.adapters import (
        ADAPTERS,
        ENGINE_ADAPTERS,
        Adapted,
        Adapter,
        Availability,
        Detection,
        MetricStatus,
        adapt_scrape,
        detect,
    )
    from infertriage.collect.environment import snapshot_environment
    from infertriage.collect.fleet_samples import FleetSamples, fleet_samples
    from infertriage.collect.gpu import GpuDevice, NvmlSampler, gpu_inventory, open_nvml
    from infertriage.collect.host import (
        HostSample,
        HostSampler,
        PySpyDump,
        ServerProcess,
        ThreadCpu,
        find_server_process,
        py_spy_dump,
    )
    from infertriage.collect.http import FetchError, base_url_of, is_url, metrics_url_of
    from infertriage.collect.parse import (
        Exposition,
        RawSample,
        parse_metrics_text,
        read_metrics_file,
    )
    from infertriage.collect.prometheus_api import (
        FleetFigure,
        FleetView,
        PrometheusClient,
        collect_fleet,
    )
    from infertriage.collect.readiness import (
        GpuMemory,
        Readiness,
        check_readiness,
        wait_until_ready,
    )
    from infertriage.collect.scraper import Scraper, ScrapeTarget, samples_of
    from infertriage.collect.server_config import (
        config_from_metrics,
        fetch_server_config,
    )
    from infertriage.collect.stage import Collected, Collector
    from infertriage.collect.view import (
        QUANTILES,
        DerivedFigure,
        MetricEntry,
        MetricsView,
        Scrape,
        ServerEvent,
        build_view,
    )

__all__ = [
    "ADAPTERS",
    "ENGINE_ADAPTERS",
    "QUANTILES",
    "Adapted",
    "Adapter",
    "Availability",
    "Collected",
    "Collector",
    "DerivedFigure",
    "Detection",
    "Exposition",
    "FetchError",
    "FleetFigure",
    "FleetSamples",
    "FleetView",
    "GpuDevice",
    "GpuMemory",
    "HostSample",
    "HostSampler",
    "MetricEntry",
    "MetricStatus",
    "MetricsView",
    "NvmlSampler",
    "PrometheusClient",
    "PySpyDump",
    "RawSample",
    "Readiness",
    "Scrape",
    "ScrapeTarget",
    "Scraper",
    "ServerEvent",
    "ServerProcess",
    "ThreadCpu",
    "adapt_scrape",
    "base_url_of",
    "build_view",
    "check_readiness",
    "collect_fleet",
    "config_from_metrics",
    "detect",
    "fetch_server_config",
    "find_server_process",
    "fleet_samples",
    "gpu_inventory",
    "is_url",
    "metrics_url_of",
    "open_nvml",
    "parse_metrics_text",
    "py_spy_dump",
    "read_metrics_file",
    "samples_of",
    "snapshot_environment",
    "wait_until_ready",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "ADAPTERS": "infertriage.collect.adapters",
        "ENGINE_ADAPTERS": "infertriage.collect.adapters",
        "Adapted": "infertriage.collect.adapters",
        "Adapter": "infertriage.collect.adapters",
        "Availability": "infertriage.collect.adapters",
        "Detection": "infertriage.collect.adapters",
        "MetricStatus": "infertriage.collect.adapters",
        "adapt_scrape": "infertriage.collect.adapters",
        "detect": "infertriage.collect.adapters",
        "snapshot_environment": "infertriage.collect.environment",
        "FleetSamples": "infertriage.collect.fleet_samples",
        "fleet_samples": "infertriage.collect.fleet_samples",
        "GpuDevice": "infertriage.collect.gpu",
        "NvmlSampler": "infertriage.collect.gpu",
        "gpu_inventory": "infertriage.collect.gpu",
        "open_nvml": "infertriage.collect.gpu",
        "HostSample": "infertriage.collect.host",
        "HostSampler": "infertriage.collect.host",
        "PySpyDump": "infertriage.collect.host",
        "ServerProcess": "infertriage.collect.host",
        "ThreadCpu": "infertriage.collect.host",
        "find_server_process": "infertriage.collect.host",
        "py_spy_dump": "infertriage.collect.host",
        "FetchError": "infertriage.collect.http",
        "base_url_of": "infertriage.collect.http",
        "is_url": "infertriage.net.urls",  # collect.http re-exports it (and needs aiohttp)
        "metrics_url_of": "infertriage.net.urls",
        "Exposition": "infertriage.collect.parse",
        "RawSample": "infertriage.collect.parse",
        "parse_metrics_text": "infertriage.collect.parse",
        "read_metrics_file": "infertriage.collect.parse",
        "FleetFigure": "infertriage.collect.prometheus_api",
        "FleetView": "infertriage.collect.prometheus_api",
        "PrometheusClient": "infertriage.collect.prometheus_api",
        "collect_fleet": "infertriage.collect.prometheus_api",
        "GpuMemory": "infertriage.collect.readiness",
        "Readiness": "infertriage.collect.readiness",
        "check_readiness": "infertriage.collect.readiness",
        "wait_until_ready": "infertriage.collect.readiness",
        "Scraper": "infertriage.collect.scraper",
        "ScrapeTarget": "infertriage.collect.scraper",
        "samples_of": "infertriage.collect.scraper",
        "config_from_metrics": "infertriage.collect.server_config",
        "fetch_server_config": "infertriage.collect.server_config",
        "Collected": "infertriage.collect.stage",
        "Collector": "infertriage.collect.stage",
        "QUANTILES": "infertriage.collect.view",
        "DerivedFigure": "infertriage.collect.view",
        "MetricEntry": "infertriage.collect.view",
        "MetricsView": "infertriage.collect.view",
        "Scrape": "infertriage.collect.view",
        "ServerEvent": "infertriage.collect.view",
        "build_view": "infertriage.collect.view",
    },
)
