"""plan, level 1: how far the twin and `plan` are from real vLLM serving under load.

Takes a `GpuSpec`; gives a `ServingFidelity`: per load regime (moderate, near
saturation, overloaded) the median and worst |error| of TTFT mean, the per-token
interval (E2E − TTFT)/(output − 1) and E2E mean over the stages measured, and how
many real overloads the twin reproduced and how many it invented, with one line
for the terminal. The table is `data/fidelity.json`, written by
`benchmarks/twin_vs_vllm.py --write` from real vLLM runs on H100; every other GPU
generation says that no real serving measurement covers it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from infertriage.plan.gpus import GpuSpec

__all__ = ["RegimeFidelity", "ServingFidelity", "serving_fidelity"]

# The measurements behind the table are all H100's; other Hopper parts share its engine
# kernels and its fitted cost-model constants (`costparams`).
_COVERED_GENERATIONS = frozenset({"hopper"})

RegimeName = Literal["moderate", "near saturation", "overloaded"]
_REGIME_ORDER: tuple[RegimeName, ...] = ("moderate", "near saturation", "overloaded")
_REGIME_LABELS = {"moderate": "moderate load"}


@dataclass(frozen=True, slots=True)
class RegimeFidelity:
    """One load regime: (median, worst) |error| of each figure, as fractions."""

    name: RegimeName
    num_stages: int
    ttft: tuple[float, float]  # TTFT mean
    interval: tuple[float, float]  # per-token interval (E2E − TTFT)/(output − 1)
    e2e: tuple[float, float]  # E2E mean

    def statement(self) -> str:
        label = _REGIME_LABELS.get(self.name, self.name)
        return (
            f"{label} TTFT {_error(self.ttft)}, per-token {_error(self.interval)}, "
            f"E2E {_error(self.e2e)}"
        )


def _error(figure: tuple[float, float]) -> str:
    return f"±{figure[0]:.0%} (worst {figure[1]:.0%})"


@dataclass(frozen=True, slots=True)
class ServingFidelity:
    """How well real serving under load is reproduced on one GPU generation, or that nothing
    measured covers it (then `regimes` is empty and the counts are zero)."""

    generation: str
    covered: bool
    source: str = ""
    regimes: tuple[RegimeFidelity, ...] = ()
    num_real_overloads: int = 0
    num_reproduced_overloads: int = 0
    num_false_overloads: int = 0  # stages the twin overloaded that real vLLM held

    @property
    def num_stages(self) -> int:
        return sum(regime.num_stages for regime in self.regimes)

    def statement(self) -> str:
        """One line for the terminal: `under load vs real vLLM on H100 (...), 24 stages: ...`."""
        if not self.covered:
            return (
                f"no real serving measurement covers {self.generation} GPUs; "
                "error under load unknown"
            )
        regimes = "; ".join(regime.statement() for regime in self.regimes) or "no stage measured"
        overloads = (
            f"overloads {self.num_reproduced_overloads} of {self.num_real_overloads} "
            f"reproduced, {self.num_false_overloads} false"
        )
        return f"under load vs {self.source}, {self.num_stages} stages: {regimes}; {overloads}"


_Fraction = Annotated[float, Field(ge=0)]


class _Regime(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    stages: tuple[Annotated[float, Field(ge=1)]]  # the benchmark writes [count]
    ttft: tuple[_Fraction, _Fraction]
    interval: tuple[_Fraction, _Fraction]
    e2e: tuple[_Fraction, _Fraction]

    @model_validator(mode="after")
    def _median_within_worst(self) -> _Regime:
        for name in ("ttft", "interval", "e2e"):
            median, worst = getattr(self, name)
            if median > worst:
                raise ValueError(f"{name}: median |error| {median} exceeds worst {worst}")
        return self


class _Overloads(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    real: int = Field(ge=0)
    reproduced: int = Field(ge=0)
    false: int = Field(ge=0)

    @model_validator(mode="after")
    def _reproduced_within_real(self) -> _Overloads:
        if self.reproduced > self.real:
            raise ValueError(f"{self.reproduced} overloads reproduced of {self.real} real")
        return self


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    note: str = Field(alias="_note")
    source: str = Field(min_length=1)
    regimes: dict[RegimeName, _Regime]  # a regime no stage reached is left out
    overloads: _Overloads


@cache
def _table() -> _Table:
    text = resources.files("infertriage.plan").joinpath("data/fidelity.json").read_text("utf-8")
    return _Table.model_validate_json(text)


@cache
def _covered() -> ServingFidelity:
    table = _table()
    regimes = tuple(
        RegimeFidelity(
            name=name,
            num_stages=round(row.stages[0]),
            ttft=row.ttft,
            interval=row.interval,
            e2e=row.e2e,
        )
        for name in _REGIME_ORDER
        if (row := table.regimes.get(name)) is not None
    )
    return ServingFidelity(
        generation="hopper",
        covered=True,
        source=table.source,
        regimes=regimes,
        num_real_overloads=table.overloads.real,
        num_reproduced_overloads=table.overloads.reproduced,
        num_false_overloads=table.overloads.false,
    )


def serving_fidelity(gpu: GpuSpec) -> ServingFidelity:
    """The twin's and `plan`'s measured error under load on `gpu`, or that none is known."""
    if gpu.generation not in _COVERED_GENERATIONS:
        return ServingFidelity(generation=gpu.generation, covered=False)
    return replace(_covered(), generation=gpu.generation)
