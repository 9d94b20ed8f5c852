"""loadgen, level 2: the typed results of `bench`, and the hook a progress display implements.

Takes nothing; gives `ClientDiagnostics`
(the client's own health and the `client_bound` verdict), `LevelResult` (one
load level: its summary, diagnostics and validity), `Knee` (a sweep's saturation
point and the criterion used), `TokenCheck` (the server's `/tokenize` against
the workload and `usage`), `BenchResult` (the whole run, with the goodput search's
`MaxRateResult` where one ran), and `RunObserver`
(what a live display is told: a phase started with its plan, a request
finished, the phase ended; every long command tells it the same), with
`in_phase` (a phase of no requests) and `within` (names the levels of a
`bench` inside a command's phase). `report` imports these.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from infertriage.analyze.signals.reuse import PrefixReuse
from infertriage.analyze.stats.distribution import Distribution
from infertriage.analyze.stats.latency import LatencySummary
from infertriage.loadgen.maxrate import MaxRateResult
from infertriage.loadgen.saturation import Saturation
from infertriage.loadgen.spec import BenchSpec
from infertriage.loadgen.standards import ServerVerdict
from infertriage.schemas import RequestRecord, Thresholds, Validity
from infertriage.workload import FitReport

__all__ = [
    "BenchResult",
    "ClientDiagnostics",
    "Knee",
    "LevelResult",
    "RunObserver",
    "TokenCheck",
    "in_phase",
    "within",
]


@dataclass(frozen=True, slots=True)
class ClientDiagnostics:
    """The load client's own health during one level; `client_bound` says whether to trust it."""

    num_workers: int
    uvloop: bool
    cpu_s: float
    wall_s: float
    cpu_busiest: float  # the busiest worker's CPU, in cores
    loop_lag: Distribution | None
    num_chunks: int
    cpu_s_per_10k_chunks: float | None
    client_bound: bool
    host_busy: bool  # stamps ran late though the client was mostly idle
    reasons: tuple[str, ...]
    events_per_read: float | None = None  # SSE events per socket read; > 1: the reader lagged


@dataclass(frozen=True, slots=True)
class LevelResult:
    """One load level: a rate (open loop), a concurrency (closed loop) or the sweep's probe."""

    name: str
    mode: str  # "rate" | "concurrency"
    value: float
    summary: LatencySummary
    client: ClientDiagnostics
    interrupted: bool
    exhausted: bool = False
    stable: bool | None = None  # sweeps: did latency stay bounded at this rate
    num_backoffs: int = 0  # closed loop: users that waited after a fast failure
    prefix_reuse: PrefixReuse | None = None  # the prompts' reuse of earlier prefixes, as sent
    validity: Validity | None = None  # can the level be trusted (`loadgen.validity`)
    saturation: Saturation | None = None  # open loop: stopped early, over-saturated


@dataclass(frozen=True, slots=True)
class Knee:
    max_throughput: float  # requests/s of the throughput probe
    knee_rate: float | None  # the highest rate that stayed stable below the first that did not
    criterion: str


@dataclass(frozen=True, slots=True)
class TokenCheck:
    """A sample of prompts counted by the server's `/tokenize` (`loadgen.tokencheck`)."""

    form: str  # "vllm" | "llama.cpp" (the /tokenize that answered) | "none" | "" (no answer)
    num_prompts: int
    intended_tokens: int  # the workload's prompt lengths, summed
    server_tokens: int | None  # /tokenize of the prompts' text (no template, no special tokens)
    usage_tokens: int | None  # usage.prompt_tokens of the same requests
    request_tokens: int | None  # /tokenize of the prompts as the endpoint sends them


@dataclass(frozen=True, slots=True)
class BenchResult:
    run_dir: Path
    spec: BenchSpec  # as run: the URL normalised and the model chosen
    levels: tuple[LevelResult, ...]
    knee: Knee | None
    interrupted: bool
    warnings: tuple[str, ...]
    wall_anchor_s: float
    thresholds: Thresholds
    token_check: TokenCheck | None = None  # None: not run (interrupted, or no usable record)
    workload_fit: FitReport | None = None  # what fitting to the server's context changed
    standard: tuple[ServerVerdict, ...] = ()  # `--standard mlperf`: LoadGen's verdict per level
    max_rate: MaxRateResult | None = None  # `--find-max-rate`: the goodput search


class RunObserver(Protocol):
    """A live display of a long command: told when a phase starts (with what it plans: a
    duration, a number of requests, or neither), of each finished request, and when the phase
    ends (cut short by Ctrl-C or not). `request_finished` runs in the load loop, once per
    request: it must only take note."""

    def phase_started(
        self, name: str, *, duration_s: float | None = None, num_requests: int | None = None
    ) -> None: ...

    def request_finished(self, record: RequestRecord) -> None: ...

    def phase_ended(self, name: str, *, interrupted: bool = False) -> None: ...


@dataclass(frozen=True, slots=True)
class _Within:
    observer: RunObserver
    phase: str

    def _name(self, name: str) -> str:
        return f"{self.phase} · {name}" if name else self.phase

    def phase_started(
        self, name: str, *, duration_s: float | None = None, num_requests: int | None = None
    ) -> None:
        self.observer.phase_started(
            self._name(name), duration_s=duration_s, num_requests=num_requests
        )

    def request_finished(self, record: RequestRecord) -> None:
        self.observer.request_finished(record)

    def phase_ended(self, name: str, *, interrupted: bool = False) -> None:
        self.observer.phase_ended(self._name(name), interrupted=interrupted)


@contextlib.contextmanager
def in_phase(
    observer: RunObserver | None, name: str, *, duration_s: float | None = None
) -> Iterator[None]:
    """A phase without requests of its own (starting the twin, the drain, the analysis)."""
    if observer is not None:
        observer.phase_started(name, duration_s=duration_s)
    yield
    if observer is not None:
        observer.phase_ended(name)


def within(observer: RunObserver | None, phase: str) -> RunObserver | None:
    """`observer`, with each phase it is told of named `phase · level` (diagnose's warm-up)."""
    return None if observer is None else _Within(observer, phase)
