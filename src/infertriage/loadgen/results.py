"""loadgen, level 2: the typed results of `bench`, and the hook a progress display implements.

Takes nothing; gives `BenchConfig` (the validated run configuration that
run.json stores; never the API key or header values), `ClientDiagnostics`
(the client's own health and the `client_bound` verdict), `LevelResult` (one
load level: its summary and diagnostics), `Knee` (a sweep's saturation
point and the criterion used), `TokenCheck` (the server's `/tokenize` against
the workload and `usage`), `BenchResult` (the whole run), and `RunObserver`
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

from pydantic import BaseModel, ConfigDict, Field

from infertriage.analyze.stats.distribution import Distribution
from infertriage.analyze.stats.latency import LatencySummary
from infertriage.loadgen.client import Endpoint
from infertriage.schemas import RequestRecord, Thresholds
from infertriage.workload import FitReport

__all__ = [
    "BenchConfig",
    "BenchResult",
    "ClientDiagnostics",
    "Knee",
    "LevelResult",
    "RunObserver",
    "TokenCheck",
    "in_phase",
    "within",
]


class BenchConfig(BaseModel):
    """What was asked for; safe to write to run.json (no key, no header values)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str
    model: str
    endpoint: Endpoint = Endpoint.CHAT
    rates: tuple[float, ...] = ()
    concurrencies: tuple[int, ...] = ()
    sweep: bool = False
    workload: str = "chat-mix"
    arrival: str = "poisson"
    duration_s: float | None = Field(default=None, gt=0)
    num_requests: int | None = Field(default=None, gt=0)
    workers: int = Field(default=1, ge=1, le=256)
    locust_workers: int | None = Field(default=None, ge=1, le=1024)  # Locust's runner
    locust_master_host: str | None = None  # None: a local master and local workers
    max_concurrency: int | None = Field(default=None, ge=1)
    think_time_s: float = Field(default=0.0, ge=0)
    timeout_s: float = Field(default=600.0, gt=0)
    stall_timeout_s: float = Field(default=60.0, gt=0)
    drain_timeout_s: float = Field(default=30.0, ge=0)
    drain_settle_share: float | None = Field(default=None, gt=0, le=1)  # `runner.drain_settled`
    goodput: str | None = None
    seed: int = 0
    tokenizer: Path | None = None
    max_model_len: int | None = Field(default=None, gt=0)
    continuous_usage: bool = True
    ignore_eos: bool = True  # send ignore_eos and min_tokens = max_tokens (exact lengths)
    check_tokens: bool = True  # count a sample of prompts with the server's /tokenize
    header_names: tuple[str, ...] = ()
    use_uvloop: bool = True


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
    config: BenchConfig
    levels: tuple[LevelResult, ...]
    knee: Knee | None
    interrupted: bool
    warnings: tuple[str, ...]
    wall_anchor_s: float
    thresholds: Thresholds
    token_check: TokenCheck | None = None  # None: not run (interrupted, or no usable record)
    workload_fit: FitReport | None = None  # what fitting to the server's context changed


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
