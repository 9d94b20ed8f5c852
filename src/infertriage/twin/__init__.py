"""twin, level 2: a simulated vLLM-V1-like server (engine core, scenarios, `simulate`).

Takes a scenario (a packaged name or a YAML file); gives an `EngineCore` that steps
schedule → execute (the `plan` roofline) → update on an injectable clock, and
`simulate`, which runs it on a virtual clock under seeded load and returns a
`SimulationResult`. The HTTP server, /metrics and /dcgm live in their own modules
(`twin.server` and friends) so that importing the engine needs no aiohttp.
"""

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
