"""plan, level 1: the cost model's fitted constants, per GPU generation and interconnect.

Takes a `GpuSpec` (its `generation`: ampere, ada, hopper, blackwell, cdna3);
gives the `RooflineParams` the step model runs with and a `Calibration` note
saying how well that generation's constants reproduce published measurements
(median and worst |error| over how many points) or that no published point
covers it. The table is `data/costmodel.json`, written by
`benchmarks/fit_costmodel.py` from the measurements it names; generations
without data borrow the nearest fitted generation's efficiencies and say so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

from infertriage.plan.gpus import GpuSpec
from infertriage.schemas.errors import UserError

__all__ = [
    "Calibration",
    "LinkParams",
    "RooflineParams",
    "calibration_for",
    "params_for",
]


@dataclass(frozen=True, slots=True)
class LinkParams:
    """One interconnect's all-reduce: `α₀ + α₁ · log₂ n + 2(n−1)/n · M / (BW · η_link)`."""

    alpha_s: float  # latency of a two-rank all-reduce of a small message
    alpha_per_doubling_s: float  # added per doubling of the rank count
    bw_efficiency: float  # bus bandwidth reached, as a fraction of the link's one-way bandwidth
    calibrated: bool = False

    def latency_s(self, num_ranks: int) -> float:
        doublings = max(0.0, math.log2(max(1, num_ranks)) - 1)
        return self.alpha_s + self.alpha_per_doubling_s * doublings


_UNCALIBRATED_PCIE = LinkParams(25e-6, 10e-6, 0.7)
_DEFAULT_NVLINK = LinkParams(20e-6, 5e-6, 0.75)


@dataclass(frozen=True, slots=True)
class RooflineParams:
    """How close to the roofline a real engine gets, and what a step and a request cost besides."""

    mem_efficiency: float = 0.8  # GEMMs streaming weights, of the HBM datasheet bandwidth
    compute_efficiency: float = 0.6
    kv_mem_efficiency: float = 0.6  # attention kernels reading the paged KV cache, of HBM
    # decode attention runs at η_c · g / (g + g½), g query heads per KV head
    attention_half_rows: float = 64.0
    expert_efficiency: float = 1.0  # routed experts' grouped GEMMs, relative to dense ones
    compute_half_tokens: float = 0.0  # η_c(n) = η_c · n / (n + n½)
    step_overhead_s: float = 5e-4  # scheduling, sampling, launch or graph replay, per step
    layer_overhead_s: float = 0.0  # small kernels per layer (norms, RoPE, cache write), per step
    seq_overhead_s: float = (
        0.0  # per sequence in the step: sampling, logits processing, bookkeeping
    )
    request_overhead_s: float = 0.0  # tokenize, detokenize, first-step setup, once per request
    nvlink: LinkParams = _DEFAULT_NVLINK  # NVLink and Infinity Fabric
    pcie: LinkParams = _UNCALIBRATED_PCIE
    activation_bytes: int = 2  # all-reduces carry BF16 hidden states

    def __post_init__(self) -> None:
        for name in (
            "mem_efficiency",
            "compute_efficiency",
            "kv_mem_efficiency",
            "expert_efficiency",
        ):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise UserError(f"roofline {name} must be in (0, 1], not {value}.")
        for name in (
            "compute_half_tokens",
            "attention_half_rows",
            "step_overhead_s",
            "layer_overhead_s",
            "seq_overhead_s",
            "request_overhead_s",
        ):
            if getattr(self, name) < 0:
                raise UserError(f"roofline {name} must be zero or more.")
        if self.activation_bytes <= 0:
            raise UserError("roofline activation_bytes must be positive.")

    def link(self, kind: str) -> LinkParams:
        return self.pcie if kind == "pcie" else self.nvlink


@dataclass(frozen=True, slots=True)
class Calibration:
    """How far the constants used for one GPU are from published measurements."""

    generation: str
    fitted_on: str  # the generation whose constants are used
    num_points: int  # published TTFT and ITL figures compared, 0 when none covers the GPU
    median_abs_error: float  # fraction
    max_abs_error: float  # fraction
    source: str
    batch_one: tuple[float, float] = (0.0, 0.0)  # (median, worst) |error| of batch-1 points
    saturation: tuple[float, float] = (0.0, 0.0)  # ... of each configuration's largest batch
    moe_points: int = 0  # MoE figures (Mixtral-8x7B) behind `moe`
    moe: tuple[float, float] = (0.0, 0.0)  # (median, worst) |error| of the MoE figures

    @property
    def covered(self) -> bool:
        return self.num_points > 0 and self.fitted_on == self.generation

    def statement(self) -> str:
        """One line for the terminal: `±9 % (worst 21 %) on 412 published points ...`."""
        if not self.covered:
            return (
                f"no published measurements cover {self.generation} GPUs; constants borrowed "
                f"from {self.fitted_on}, error unknown (expect ±30 % or more)"
            )
        return (
            f"±{self.median_abs_error:.0%} median (worst {self.max_abs_error:.0%}) "
            f"on {self.num_points:,} published points; one user ±{self.batch_one[0]:.0%} "
            f"(worst {self.batch_one[1]:.0%}), saturated ±{self.saturation[0]:.0%} "
            f"(worst {self.saturation[1]:.0%}) ({self.source})"
        )

    def moe_statement(self) -> str:
        """What is known of a MoE model's error on this GPU."""
        if self.moe_points == 0:
            return "MoE: no published MoE point covers this GPU, error unknown"
        return (
            f"MoE: expert GEMMs fitted on {self.moe_points} Mixtral-8x7B points "
            f"(±{self.moe[0]:.0%} median, worst {self.moe[1]:.0%}) run with synthetic weights, "
            "whose router sends every token to the same experts; the experts real traffic "
            "reaches are modelled, not measured"
        )

    def spread(self, batch_size: int) -> float:
        """The median |error| of the regime a step of `batch_size` sequences belongs to."""
        return self.batch_one[0] if batch_size == 1 else self.saturation[0]


class _LinkRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    alpha_s: float = Field(ge=0)
    alpha_per_doubling_s: float = Field(ge=0)
    bw_efficiency: float = Field(gt=0, le=1)
    calibrated: bool


class _GenerationRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    mem_efficiency: float = Field(gt=0, le=1)
    compute_efficiency: float = Field(gt=0, le=1)
    kv_mem_efficiency: float = Field(gt=0, le=1)
    attention_half_rows: float = Field(ge=0)
    expert_efficiency: float = Field(gt=0, le=1)
    compute_half_tokens: float = Field(ge=0)
    step_overhead_s: float = Field(ge=0)
    layer_overhead_s: float = Field(ge=0)
    seq_overhead_s: float = Field(ge=0)
    request_overhead_s: float = Field(ge=0)
    num_points: int = Field(ge=0)
    median_abs_error: float = Field(ge=0)
    max_abs_error: float = Field(ge=0)
    batch_one: tuple[float, float]
    saturation: tuple[float, float]
    moe_points: int = Field(ge=0)
    moe: tuple[float, float]
    source: str


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    note: str = Field(alias="_note")
    generations: dict[str, _GenerationRow]
    borrow: dict[str, str]  # generation without data -> the fitted one it uses
    links: dict[str, _LinkRow]


@cache
def _table() -> _Table:
    text = resources.files("infertriage.plan").joinpath("data/costmodel.json").read_text("utf-8")
    return _Table.model_validate_json(text)


def _row_for(generation: str) -> tuple[str, _GenerationRow]:
    table = _table()
    fitted = generation if generation in table.generations else table.borrow.get(generation)
    if fitted is None or fitted not in table.generations:
        fitted = "hopper"
    return fitted, table.generations[fitted]


def _link(name: str) -> LinkParams:
    row = _table().links[name]
    return LinkParams(row.alpha_s, row.alpha_per_doubling_s, row.bw_efficiency, row.calibrated)


def params_for(gpu: GpuSpec) -> RooflineParams:
    """The fitted constants for `gpu`'s generation (borrowed where it has none)."""
    return _params_for_generation(gpu.generation)


@cache
def _params_for_generation(generation: str) -> RooflineParams:
    _, row = _row_for(generation)
    return RooflineParams(
        mem_efficiency=row.mem_efficiency,
        compute_efficiency=row.compute_efficiency,
        kv_mem_efficiency=row.kv_mem_efficiency,
        attention_half_rows=row.attention_half_rows,
        expert_efficiency=row.expert_efficiency,
        compute_half_tokens=row.compute_half_tokens,
        step_overhead_s=row.step_overhead_s,
        layer_overhead_s=row.layer_overhead_s,
        seq_overhead_s=row.seq_overhead_s,
        request_overhead_s=row.request_overhead_s,
        nvlink=_link("nvlink"),
        pcie=_link("pcie"),
    )


def calibration_for(gpu: GpuSpec) -> Calibration:
    """How well `gpu`'s constants are known: the fit's error, or that nothing covers it."""
    fitted, row = _row_for(gpu.generation)
    return Calibration(
        generation=gpu.generation,
        fitted_on=fitted,
        num_points=row.num_points if fitted == gpu.generation else 0,
        median_abs_error=row.median_abs_error,
        max_abs_error=row.max_abs_error,
        source=row.source,
        batch_one=row.batch_one,
        saturation=row.saturation,
        moe_points=row.moe_points if fitted == gpu.generation else 0,
        moe=row.moe,
    )
