"""twin, level 2: a simulated vLLM-V1-like server (engine core, scenarios, `simulate`).

Takes a scenario (a packaged name or a YAML file); gives an `EngineCore` that steps
schedule → execute (the `plan` roofline) → update on an injectable clock, and
`simulate`, which runs it on a virtual clock under seeded load and returns a
`SimulationResult`. The HTTP server, /metrics and /dcgm live in their own modules
(`twin.server` and friends) so that importing the engine needs no aiohttp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infertriage.schemas.lazy import lazy_exports

if TYPE_CHECKING:
    from infertriage.twin.capacity import Hardware, make_hardware
    from infertriage.twin.costmodel import BatchShape, CostModel, StepBreakdown
    from infertriage.twin.engine import (
        Clock,
        DecodeRun,
        EngineCore,
        GpuCounters,
        MonotonicClock,
        RequestRejectedError,
        StepResult,
        VirtualClock,
    )
    from infertriage.twin.request import (
        FinishReason,
        RequestTimings,
        SamplingParams,
        output_token_id,
        request_seed,
    )
    from infertriage.twin.results import LatencyPercentiles, SimulationResult
    from infertriage.twin.scenario import list_scenarios, load_scenario, scenario_from_mapping
    from infertriage.twin.scenario_model import Scenario
    from infertriage.twin.scheduler import RequestOutput, SchedulerStats, SpecDecodeCounters
    from infertriage.twin.simulate import simulate

__all__ = [
    "BatchShape",
    "Clock",
    "CostModel",
    "DecodeRun",
    "EngineCore",
    "FinishReason",
    "GpuCounters",
    "Hardware",
    "LatencyPercentiles",
    "MonotonicClock",
    "RequestOutput",
    "RequestRejectedError",
    "RequestTimings",
    "SamplingParams",
    "Scenario",
    "SchedulerStats",
    "SimulationResult",
    "SpecDecodeCounters",
    "StepBreakdown",
    "StepResult",
    "VirtualClock",
    "list_scenarios",
    "load_scenario",
    "make_hardware",
    "output_token_id",
    "request_seed",
    "scenario_from_mapping",
    "simulate",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "Hardware": "infertriage.twin.capacity",
        "make_hardware": "infertriage.twin.capacity",
        "BatchShape": "infertriage.twin.costmodel",
        "CostModel": "infertriage.twin.costmodel",
        "StepBreakdown": "infertriage.twin.costmodel",
        "Clock": "infertriage.twin.engine",
        "DecodeRun": "infertriage.twin.engine",
        "EngineCore": "infertriage.twin.engine",
        "GpuCounters": "infertriage.twin.engine",
        "MonotonicClock": "infertriage.twin.engine",
        "RequestRejectedError": "infertriage.twin.engine",
        "StepResult": "infertriage.twin.engine",
        "VirtualClock": "infertriage.twin.engine",
        "FinishReason": "infertriage.twin.request",
        "RequestTimings": "infertriage.twin.request",
        "SamplingParams": "infertriage.twin.request",
        "output_token_id": "infertriage.twin.request",
        "request_seed": "infertriage.twin.request",
        "LatencyPercentiles": "infertriage.twin.results",
        "SimulationResult": "infertriage.twin.results",
        "list_scenarios": "infertriage.twin.scenario",
        "load_scenario": "infertriage.twin.scenario",
        "scenario_from_mapping": "infertriage.twin.scenario",
        "Scenario": "infertriage.twin.scenario_model",
        "RequestOutput": "infertriage.twin.scheduler",
        "SchedulerStats": "infertriage.twin.scheduler",
        "SpecDecodeCounters": "infertriage.twin.scheduler",
        "simulate": "infertriage.twin.simulate",
    },
)
