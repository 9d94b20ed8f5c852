"""report.html, level 4: what one HTML report shows — plain data, built by `api.report`.

Takes nothing from disk: `api.report` reads a run directory (diagnose,
bench, validate or an A/B compare) into a `RunReport`; gives the types the
page and its charts are drawn from. Times are seconds on the run's clock,
values SI (seconds, fractions, bytes, per second); every string may be the
server's and is escaped where the page writes it (`report.html.page`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from infertriage.analyze.stats.latency import LatencySummary
from infertriage.report.compare import CompareResult
from infertriage.schemas import Check, Diagnosis, Signal, SloResult, Validity

__all__ = [
    "AbPlan",
    "Band",
    "Chart",
    "LevelView",
    "Look",
    "MaxRateView",
    "RateStep",
    "RunReport",
    "Series",
]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Series:
    """One line of a chart: `(t, value)` points in time order."""

    name: str
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class Chart:
    """One time-series chart: its lines share a unit ("fraction", "1/s", "tokens/s", "1")."""

    title: str
    unit: str
    series: tuple[Series, ...]
    note: str = ""


@dataclass(frozen=True, slots=True)
class Band:
    """A span of the run's clock shaded behind every chart: a load level, a phase."""

    name: str
    start_ts: float
    end_ts: float


@dataclass(frozen=True, slots=True)
class LevelView:
    """One load level (or validate phase, or A/B arm): its summary and raw latencies."""

    name: str
    summary: LatencySummary
    slo: tuple[SloResult, ...]
    ttft_s: FloatArray  # per finished request
    itl_s: FloatArray  # per output token
    validity: Validity | None = None  # VALID, or INVALID with the reasons (`loadgen.validity`)
    saturation: str | None = None  # stopped early, over-saturated: the evidence line
    mlperf: str | None = None  # `--standard mlperf`: LoadGen's summary block of the level


@dataclass(frozen=True, slots=True)
class RateStep:
    """One rate of the goodput search (`bench --find-max-rate`), as run.json keeps it."""

    rate: float  # req/s
    num_judged: int
    attainment: float  # fraction
    interval: tuple[float, float]  # attainment's 95 % interval
    holds: bool | None  # None: undecided
    valid: bool
    why: str


@dataclass(frozen=True, slots=True)
class MaxRateView:
    """The goodput search: the rate found (None: none held), its bracket, rule and steps."""

    rule: str  # attainment | mlperf-server
    target: float  # the attainment asked for
    slos: tuple[tuple[str, float], ...]  # metric, limit (s)
    max_rate: float | None
    attainment: float | None
    interval: tuple[float, float] | None
    bracket: tuple[float | None, float | None]
    converged: bool
    why: str
    steps: tuple[RateStep, ...]
    probe_rps: float | None = None


@dataclass(frozen=True, slots=True)
class Look:
    """One look of `compare --until-decided`: after which block, at what alpha, what's left."""

    index: int
    block: int
    per_arm: int
    alpha: float
    undecided: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AbPlan:
    """What compare.json adds to an A/B run: the sample plan, the looks, the notes, the
    verdict compare gave (which a recomputation without the looks' alphas may not)."""

    plan: str | None = None  # the sample plan, one line
    needs: tuple[tuple[str, int], ...] = ()  # metric, requests per arm it needs
    looks: tuple[Look, ...] = ()
    notes: tuple[str, ...] = ()
    verdict: str | None = None


@dataclass(frozen=True, slots=True)
class RunReport:
    """Everything one report holds; sections with nothing to show are left out."""

    command: str  # diagnose, bench, validate, compare
    target: str  # the URL, twin:<scenario>, or "A … vs B …"
    run_dir: Path
    created_unix_s: float
    status: str  # complete, interrupted, running
    facts: tuple[tuple[str, str], ...] = ()  # engine, version, model, GPUs, …
    notes: tuple[str, ...] = ()
    diagnosis: Diagnosis | None = None
    levels: tuple[LevelView, ...] = ()
    main_level: str | None = None
    span: tuple[float, float] = (0.0, 1.0)  # the run's clock, first event to last
    bands: tuple[Band, ...] = ()
    charts: tuple[Chart, ...] = ()
    trace: tuple[Signal, ...] = ()
    checks: tuple[Check, ...] = ()
    comparison: CompareResult | None = None
    ab_plan: AbPlan | None = None  # compare.json's plan and looks
    max_rate: MaxRateView | None = None  # `bench --find-max-rate`
    hints: tuple[str, ...] = field(default=())  # what would fill a section left empty
