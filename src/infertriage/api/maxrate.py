"""api, level 5: `bench --find-max-rate` — drives the goodput search over bench's levels.

Takes the `BenchSpec` (its SLOs, rule, target and tolerance) and, after each level `bench`
ran, that level's result and records; gives the next level to run (`next_levels`: a
Poisson rate; `level_spec`: its requests; `offered`: its arrivals scaled to the rate) and,
at the end, the `MaxRateResult` (`loadgen.maxrate`: the search itself and its rules).
Each helper takes the driver or None (no search), so `api.bench` calls each in one line.
The first level is a closed-loop throughput probe, as `--sweep`'s; each later
level is one rate of the search, judged on its own records or, when an undecided rate
runs again, on both runs pooled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from infertriage.analyze.stats.latency import Slo
from infertriage.api.specs import BenchSpec, LoadMode
from infertriage.loadgen.maxrate import (
    STEP_CHECKS,
    MaxRateResult,
    MaxRateSearch,
    SearchStep,
    at_rate,
    judge_step,
    step_requests,
)
from infertriage.loadgen.results import LevelResult
from infertriage.schemas import RequestRecord, UserError
from infertriage.workload import Schedule, WorkloadKind, WorkloadSpec
from infertriage.workload.sources import read_jsonl_requests

__all__ = [
    "NextLevel",
    "RateSearchDriver",
    "level_names",
    "level_spec",
    "next_levels",
    "offered",
    "probe_level",
]

PROBE_CONCURRENCY = 64  # the throughput probe's users, --max-concurrency unless given


class NextLevel(NamedTuple):
    """A level for bench to run: a Poisson rate, or (the probe) a closed loop of users."""

    name: str
    mode: LoadMode
    value: float  # req/s, or the probe's users


def probe_level(spec: BenchSpec) -> NextLevel:
    """The search's first level, the closed-loop probe; one sentence if the spec cannot
    be searched (`--find-max-rate` chooses its own rates and needs an SLO)."""
    if spec.rates or spec.concurrencies or spec.sweep:
        raise UserError(
            "--find-max-rate chooses its own rates: drop --rate, --concurrency and --sweep."
        )
    if spec.goodput is None and spec.thresholds is None:
        raise UserError("--find-max-rate needs an SLO to hold: give --goodput or --slo.")
    if spec.arrival != "poisson":
        raise UserError("--find-max-rate searches Poisson rates: drop --arrival.")
    if _replays(spec.workload):
        raise UserError(
            f"--workload {spec.workload.text} replays its own timestamps and --find-max-rate "
            "offers its own Poisson rates: use jsonl:FILE,replay=false for the file's requests."
        )
    users = spec.max_concurrency or PROBE_CONCURRENCY
    return NextLevel(f"probe concurrency={users}", LoadMode.CONCURRENCY, float(users))


def _replays(workload: WorkloadSpec) -> bool:
    """Does the workload replay its own arrival times (a trace; a jsonl file with timestamps
    and replay left on)? Read before any request, so the search is refused before its probe."""
    if workload.kind is WorkloadKind.TRACE:
        return True
    if not workload.is_replay or workload.path is None:
        return False
    items = read_jsonl_requests(workload.path)
    return bool(items) and items[0].timestamp_s is not None


def level_names(rate: float) -> tuple[str, str]:
    """The names of a step's level at `rate` and of its rerun (its records' `level` label)."""
    name = f"rate={rate:.4g}"
    return name, f"{name} again"


def _failed_checks(level: LevelResult) -> list[str]:
    """The level's failed validity checks that a step is held to (`maxrate.STEP_CHECKS`)."""
    checks = level.validity.checks if level.validity is not None else ()
    return [check.line() for check in checks if not check.passed and check.name in STEP_CHECKS]


@dataclass(slots=True)
class RateSearchDriver:
    """The search between bench's levels: `after` each level, the next one (or none)."""

    spec: BenchSpec
    slos: tuple[Slo, ...]
    search: MaxRateSearch | None = None
    pending: SearchStep | None = None
    pooled: list[RequestRecord] = field(default_factory=list)  # the current rate's runs
    failed: list[str] = field(default_factory=list)  # their failed validity checks

    @property
    def base_requests(self) -> int | None:
        """A level's requests: the spec's; none with only a duration; else the rule's."""
        spec = self.spec
        if spec.num_requests is not None or spec.duration_s is not None:
            return spec.num_requests
        return step_requests(spec.max_rate_rule)

    @property
    def num_requests(self) -> int | None:
        """The next level's requests (a rerun's: what would settle it)."""
        step, base = self.pending, self.base_requests
        return step.more if step is not None and step.more and base is not None else base

    def offered(self, schedule: Schedule) -> Schedule:
        """A step's schedule, its arrivals scaled to offer the step's rate exactly
        (`maxrate.at_rate`); the probe's closed loop and a --duration level as they are."""
        step, offsets = self.pending, schedule.offsets_s
        if step is None or offsets is None or self.spec.duration_s is not None:
            return schedule
        scaled = np.asarray(at_rate(offsets.tolist(), step.rate), dtype=np.float64)
        return Schedule(schedule.specs, scaled, schedule.sessions)

    def after(self, level: LevelResult, records: Sequence[RequestRecord]) -> NextLevel | None:
        """The level just run (the probe first), and its records; the next level, or None."""
        if self.search is None:
            self.search = MaxRateSearch(
                probe_rps=level.summary.request_throughput, tolerance=self.spec.rate_tolerance
            )
            return self._level(self.search.first())
        step = self.pending
        if step is None:
            return None
        failed = _failed_checks(level)
        self.pooled = [*self.pooled, *records] if step.more else list(records)
        self.failed = [*self.failed, *failed] if step.more else failed
        judgement = judge_step(
            step.rate,
            self.pooled,
            self.slos,
            rule=self.spec.max_rate_rule,
            target=self.spec.attainment,
            stable=level.stable,
            client_bound=level.client.client_bound,
            failed_checks=self.failed,
        )
        return self._level(self.search.record(judgement))

    def _level(self, step: SearchStep | None) -> NextLevel | None:
        self.pending = step
        if step is None:
            return None
        first, again = level_names(step.rate)
        return NextLevel(again if step.more else first, LoadMode.RATE, step.rate)

    def result(self, interrupted: bool = False) -> MaxRateResult | None:
        """The search's answer; `interrupted`: Ctrl-C cut it short (it says so)."""
        if self.search is None:
            return None
        return self.search.result(
            self.spec.max_rate_rule, self.spec.attainment, self.slos, interrupted=interrupted
        )


def level_spec(driver: RateSearchDriver | None, spec: BenchSpec) -> BenchSpec:
    """The spec the next level is scheduled from: the search's request count in it."""
    if driver is None or driver.num_requests == spec.num_requests:
        return spec
    return spec.model_copy(update={"num_requests": driver.num_requests})


def offered(driver: RateSearchDriver | None, schedule: Schedule) -> Schedule:
    """`schedule` as the search offers it (`RateSearchDriver.offered`); as is with no search."""
    return schedule if driver is None else driver.offered(schedule)


def next_levels(
    driver: RateSearchDriver | None, level: LevelResult, records: Sequence[RequestRecord]
) -> list[NextLevel]:
    """The search's next level after `level`, if any; none with no search, nor after a level
    Ctrl-C cut short (its partial load, before any queue built, is not judged)."""
    if level.interrupted:
        return []
    found = driver.after(level, records) if driver is not None else None
    return [found] if found is not None else []
