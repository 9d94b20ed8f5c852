"""loadgen, level 2: the load engines behind one seam, and the one table that picks them.

Takes a `BenchSpec` and a `LoadContext` (the client, the run's clock, the sink every
record goes to, the `stop` a caller polls, the local tokenizer, where process logs go);
gives a `LoadEngine`, whose `run_level(plan)` sends one level's `LoadPlan` and gives a
`LoadRun` (the workers' reports, whether it was stopped, what was lost on the way).
The engines: `asyncio` (one event loop in this process, `runner`), `workers`
(`--workers N` processes, `workers`) and `locust` (a Locust master and
`--locust-workers N`, `locust`). `LOAD_ENGINES` is the one table of them;
`engine_kind(config)` names the one a config asks for (and refuses a config that asks
for two), `make_engine` builds it. A caller (`api.bench`) calls the protocol only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from infertriage.loadgen.client import ClientConfig
from infertriage.loadgen.locust import run_locust
from infertriage.loadgen.runner import LoadPlan, WorkerReport, have_uvloop, run_load, run_sync
from infertriage.loadgen.spec import BenchSpec
from infertriage.loadgen.workers import run_parallel
from infertriage.schemas import RequestRecord, UserError
from infertriage.workload import LocalTokenizer, TextRenderer, WorkloadKind

__all__ = [
    "LOAD_ENGINES",
    "LoadContext",
    "LoadEngine",
    "LoadRun",
    "engine_kind",
    "make_engine",
]

_START_DELAY_S = 0.01  # the in-process loop starts this long after it is asked


@dataclass(frozen=True, slots=True)
class LoadContext:
    """What every engine is handed once per run; `stop` is polled while a level runs."""

    client: ClientConfig
    clock_start_ns: int
    sink: Callable[[RequestRecord], None]
    stop: Callable[[], bool]
    tokenizer: LocalTokenizer | None
    run_root: Path  # an engine with processes of its own keeps their logs under it
    on_note: Callable[[str], None] = lambda text: None


@dataclass(frozen=True, slots=True)
class LoadRun:
    """One level as an engine ran it."""

    reports: list[WorkerReport]
    interrupted: bool
    lost: tuple[str, ...] = ()  # warnings: what the engine could not pass on


class LoadEngine(Protocol):
    """One way to send a level's plan; every record goes to the context's sink."""

    load_engine: ClassVar[str]  # run.json's environment.load_engine

    def run_level(self, plan: LoadPlan) -> LoadRun: ...

    def uses_uvloop(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class AsyncioEngine:
    """One event loop in this process (`runner.run_load`)."""

    config: BenchSpec
    context: LoadContext
    load_engine: ClassVar[str] = "infertriage"

    def run_level(self, plan: LoadPlan) -> LoadRun:
        ctx = self.context
        report = run_sync(
            run_load(
                plan,
                ctx.client,
                clock_start_ns=ctx.clock_start_ns,
                load_start_ns=time.perf_counter_ns() + round(_START_DELAY_S * 1e9),
                sink=ctx.sink,
                renderer=TextRenderer(ctx.tokenizer),
                tokenizer=ctx.tokenizer,
                stop=ctx.stop,
            ),
            use_uvloop=self.config.use_uvloop,
        )
        return LoadRun([report], report.interrupted)

    def uses_uvloop(self) -> bool:
        return self.config.use_uvloop and have_uvloop()


@dataclass(frozen=True, slots=True)
class WorkersEngine:
    """`--workers N`: one event loop per process on one schedule (`workers.run_parallel`)."""

    config: BenchSpec
    context: LoadContext
    load_engine: ClassVar[str] = "infertriage"

    def run_level(self, plan: LoadPlan) -> LoadRun:
        ctx = self.context
        reports, interrupted = run_parallel(
            plan,
            ctx.client,
            self.config.workers,
            clock_start_ns=ctx.clock_start_ns,
            sink=ctx.sink,
            tokenizer=ctx.tokenizer,
            stop=ctx.stop,
        )
        return LoadRun(reports, interrupted)

    def uses_uvloop(self) -> bool:
        return self.config.use_uvloop and have_uvloop()


@dataclass(frozen=True, slots=True)
class LocustEngine:
    """`--locust-workers N`: a Locust master and its workers (`locust.run_locust`)."""

    config: BenchSpec
    context: LoadContext
    load_engine: ClassVar[str] = "locust"

    def run_level(self, plan: LoadPlan) -> LoadRun:
        ctx, cfg = self.context, self.config
        run = run_locust(
            plan,
            ctx.client,
            cfg.locust_workers or 1,
            master_host=cfg.locust_master_host,
            clock_start_ns=ctx.clock_start_ns,
            sink=ctx.sink,
            tokenizer=cfg.client.tokenizer,
            log_dir=ctx.run_root / "locust",
            stop=ctx.stop,
            on_note=ctx.on_note,
        )
        return LoadRun(run.reports, run.interrupted, run.lost)

    def uses_uvloop(self) -> bool:
        return False  # gevent, in processes of their own


EngineFactory = Callable[[BenchSpec, LoadContext], LoadEngine]

# The one table of load engines: a name, and how it is built from the config and context.
LOAD_ENGINES: dict[str, EngineFactory] = {
    "asyncio": AsyncioEngine,
    "workers": WorkersEngine,
    "locust": LocustEngine,
}


def engine_kind(config: BenchSpec) -> str:
    """The engine a config asks for: `--locust-workers`, `--workers N`, else one event loop."""
    if config.locust_workers is not None and config.workers > 1:
        raise UserError("--workers and --locust-workers both spread the load; give one of them.")
    if config.locust_master_host and config.locust_workers is None:
        raise UserError("--locust-master-host needs --locust-workers N.")
    if config.locust_workers is not None:
        if config.workload.kind is WorkloadKind.AGENTIC:
            raise UserError(
                "--locust-workers cannot run agentic sessions (a step waits for the one "
                "before it); use --workers N."
            )
        return "locust"
    return "workers" if config.workers > 1 else "asyncio"


def make_engine(config: BenchSpec, context: LoadContext) -> LoadEngine:
    """The engine `config` asks for (`engine_kind`), from `LOAD_ENGINES`."""
    return LOAD_ENGINES[engine_kind(config)](config, context)
