"""plan, level 1: the result of the `plan` command, as the report stage renders it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: a plan without --rate, --traffic… loads none of these
    from infertriage.plan.advice import ParallelAdvice
    from infertriage.plan.capacity import CapacityPlan
    from infertriage.plan.disagg import DisaggPlan
    from infertriage.plan.offload import OffloadPlan
    from infertriage.plan.parallel_choice import LayoutChoice
    from infertriage.plan.pipeline import PipelinePlan
    from infertriage.plan.traffic import TrafficPlan
    from infertriage.plan.whatif import WhatIfRow

__all__ = ["MeasuredMaxRate", "PlanReport", "RunWorkload"]


@dataclass(frozen=True, slots=True)
class MeasuredMaxRate:
    """A run's goodput search (`bench --find-max-rate`): the largest Poisson rate at which one
    replica held its SLOs, and how that was judged."""

    rate_rps: float
    bracket_high_rps: float | None  # the smallest rate that did not hold
    rule: str  # "attainment" | "mlperf-server"
    target: float  # attainment's target
    slos: tuple[tuple[str, float], ...]  # (metric, limit in seconds)
    attainment: float | None
    attainment_interval: tuple[float, float] | None


@dataclass(frozen=True, slots=True)
class RunWorkload:
    """What a recorded run says about the workload: mean lengths, concurrency, throughput;
    with a goodput search, of the level at the rate it found, and that rate."""

    num_requests: int
    mean_input_len: int
    mean_output_len: int
    mean_concurrency: float
    output_tok_s: float
    max_rate: MeasuredMaxRate | None = None


@dataclass(frozen=True, slots=True)
class PlanReport:
    plan: CapacityPlan
    advice: ParallelAdvice | None
    advice_error: str = ""
    what_if: tuple[WhatIfRow, ...] = ()
    itl_efficiency: float | None = None  # roofline ITL / measured ITL
    throughput_efficiency: float | None = None  # measured / roofline throughput
    cost_per_million_output_tokens: float | None = None
    from_run: RunWorkload | None = None
    traffic: TrafficPlan | None = None  # `--traffic`: replicas over the curve
    layout: LayoutChoice | None = None  # DP vs TP vs EP on `--num-gpus`
    disagg: DisaggPlan | None = None  # `--rate`: xPyD against colocated
    pipeline: PipelinePlan | None = None  # a model beyond one node: PP depth, micro-batches
    offload: OffloadPlan | None = None  # `--offload-gb`: what a CPU KV tier buys
    replicas_at_rate: int | None = None  # `--rate` over a run's measured max rate, rounded up
