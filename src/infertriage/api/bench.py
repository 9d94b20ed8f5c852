"""api, level 5: the `bench` command's entry point, `run_bench`.

Takes a `BenchSpec` (URL, client, load levels, workload, bounds, workers, SLOs;
`api.specs`); does the whole load test — checks the URL fails fast, learns the server's
context (`api.preflight`), builds one seeded schedule per level and fits it to that
context, runs it on the load engine the spec asks for (`loadgen.load_engine`: one event
loop, `--workers` processes or a Locust master and `--locust-workers`), appends every
record to requests.jsonl as it finishes, counts a sample of the prompts with the server's
`/tokenize` (`loadgen.tokencheck`), and writes run.json (rewritten after each level, so a
killed run keeps a summary), signals.jsonl, the CSVs and `--export`'s files
(`api.exports`, read back from the run); gives a `BenchResult`.
Ctrl-C (`api.interrupt`) stops the load, keeps every record and returns the partial result
with `interrupted` set; run.json's status says so. A caller that writes several loads into
one run passes a `SharedRun` (its `RunDir` and clock). run.json stores the spec (`spec`,
the URL normalised — never with its `user:password@`, `api.specs` — and the model chosen)
beside the resolved `config` (`BenchSpec.run_config`: the same keys for every reader). The
API key and header values are sent, never stored. `--standard mlperf`: the preset's spec,
each level judged as LoadGen's Server run (`loadgen.standards`, `report.mlperf`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import platform
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from infertriage import __version__
from infertriage.analyze.signals.reuse import prefix_reuse
from infertriage.analyze.stats.distribution import Distribution, describe
from infertriage.analyze.stats.latency import (
    Slo,
    default_slos,
    judge_client,
    parse_slos,
    schedule_behind,
    summarize,
    summary_signals,
)
from infertriage.api.exports import export_run
from infertriage.api.interrupt import Interrupt, interruptible
from infertriage.api.maxrate import RateSearchDriver, level_spec, next_levels, offered, probe_level
from infertriage.api.preflight import (
    ServerInfo,
    WorkloadFit,
    choose_model,
    context_limit,
    preflight,
)
from infertriage.api.specs import BenchSpec, LoadMode
from infertriage.loadgen import caveats, tokencheck
from infertriage.loadgen.client import ClientConfig
from infertriage.loadgen.load_engine import LoadContext, LoadEngine, engine_kind, make_engine
from infertriage.loadgen.results import (
    BenchResult,
    ClientDiagnostics,
    Knee,
    LevelResult,
    RunObserver,
    TokenCheck,
)
from infertriage.loadgen.runner import LoadPlan, WorkerReport
from infertriage.loadgen.saturation import Saturation
from infertriage.loadgen.spec import client_config
from infertriage.loadgen.standards import ServerVerdict, apply_standard, judge_level
from infertriage.loadgen.sweep import find_knee, judge_stable, sweep_rates
from infertriage.loadgen.validity import level_validity
from infertriage.net import auth_headers, normalize_base_url
from infertriage.report.bench import bench_to_json, write_csv
from infertriage.report.mlperf import SUMMARY_FILE, summary_file, with_verdicts
from infertriage.schemas import (
    BenchRunInfo,
    BenchSummary,
    JsonlWriter,
    RequestRecord,
    RunClock,
    RunDir,
    RunEnvironment,
    RunServerConfig,
    RunStatus,
    Thresholds,
    TokenSource,
    UserError,
    check_out,
)
from infertriage.workload import (
    LocalTokenizer,
    Schedule,
    TextRenderer,
    WorkloadKind,
    make_schedule,
    make_specs,
    parse_arrivals,
)

__all__ = ["BenchResult", "BenchSpec", "SharedRun", "normalize_base_url", "reach", "run_bench"]

_DEFAULT_NUM_REQUESTS = 100
_DEFAULT_CONCURRENCY = 8
_SWEEP_PROBE_CONCURRENCY = 64
_SYNTHETIC_PROMPTS = {WorkloadKind.SYNTHETIC, WorkloadKind.CHAT_MIX, WorkloadKind.PREFIX}
_TOKEN_CHECK_SAMPLE = 8  # prompts of the first level counted by the server's /tokenize


def reach(url: str, api_key: str | None, headers: Sequence[tuple[str, str]] = ()) -> None:
    """A wrong URL, a server that is down or a refused key fails here, in one sentence,
    before a run directory is made (so nothing is left behind but the error)."""
    preflight(normalize_base_url(url), auth_headers(api_key, headers), need_model=False)


@dataclass(frozen=True, slots=True)
class SharedRun:
    """The run directory and clock a command's several loads share (diagnose, validate,
    compare): every load appends to its requests.jsonl and rewrites its run.json."""

    run: RunDir
    clock: RunClock = field(default_factory=RunClock)


class _Level(NamedTuple):
    name: str
    mode: LoadMode
    value: float


def _levels(spec: BenchSpec) -> list[_Level]:
    """The levels known up front; a sweep adds its rates after the probe."""
    if spec.rates and spec.concurrencies:
        raise UserError("give --rate or --concurrency, not both (use --max-concurrency to cap).")
    if spec.sweep:
        if spec.rates or spec.concurrencies:
            raise UserError("--sweep chooses its own rates: drop --rate and --concurrency.")
        probe = spec.max_concurrency or _SWEEP_PROBE_CONCURRENCY
        return [_Level(f"probe concurrency={probe}", LoadMode.CONCURRENCY, float(probe))]
    if spec.rates:
        return [_Level(f"rate={_fmt(r)}", LoadMode.RATE, r) for r in spec.rates]
    if spec.concurrencies:
        return [
            _Level(f"concurrency={c}", LoadMode.CONCURRENCY, float(c)) for c in spec.concurrencies
        ]
    if spec.workload.is_replay:
        return [_Level("replay", LoadMode.REPLAY, 0.0)]
    default = _DEFAULT_CONCURRENCY
    return [_Level(f"concurrency={default}", LoadMode.CONCURRENCY, float(default))]


def _fmt(rate: float) -> str:
    return "inf" if math.isinf(rate) else f"{rate:g}"


def _schedule(
    spec: BenchSpec,
    level: _Level,
    *,
    max_model_len: int,
    tokenizer: LocalTokenizer | None,
) -> Schedule:
    mode, value = level.mode, level.value
    num = spec.num_requests
    if num is None and spec.duration_s is None:
        num = _DEFAULT_NUM_REQUESTS
    if mode is LoadMode.RATE and math.isinf(value):
        if num is None:
            raise UserError("--rate inf sends everything at once: give --num-requests.")
        if spec.workload.kind is WorkloadKind.AGENTIC:  # every session at once
            built = make_schedule(
                spec.workload,
                None,
                num_requests=num,
                duration_s=None,
                seed=spec.seed,
                max_model_len=max_model_len,
            )
            return Schedule(built.specs, np.zeros(len(built)), built.sessions)
        specs = make_specs(
            spec.workload, num, seed=spec.seed, max_model_len=max_model_len, tokenizer=tokenizer
        )
        return Schedule(specs, np.zeros(len(specs)))
    return make_schedule(
        spec.workload,
        parse_arrivals(spec.arrival, value) if mode is LoadMode.RATE else None,
        num_requests=num,
        duration_s=spec.duration_s,
        concurrency=round(value) if mode is LoadMode.CONCURRENCY else 1,
        seed=spec.seed,
        max_model_len=max_model_len,
        tokenizer=tokenizer,
    )


@dataclass(slots=True)
class _Session:
    """One bench run's state: its directory, clock, writer and the records of the current level."""

    spec: BenchSpec  # as asked, the URL normalised and the model chosen: run.json's `spec`
    client: ClientConfig
    shared: SharedRun  # diagnose shares one clock with its collector
    thresholds: Thresholds
    slos: tuple[Slo, ...]
    tokenizer: LocalTokenizer | None
    observer: RunObserver | None
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    writer: JsonlWriter = field(init=False)
    records: list[RequestRecord] = field(default_factory=list)
    all_records: list[RequestRecord] = field(default_factory=list)
    levels: list[LevelResult] = field(default_factory=list)
    verdicts: list[ServerVerdict] = field(default_factory=list)  # `--standard mlperf`
    warnings: list[str] = field(default_factory=list)
    first_schedule: Schedule | None = None
    token_check: TokenCheck | None = None
    fitting: WorkloadFit | None = None  # set once the server's context is known
    interrupt: Interrupt = field(default_factory=Interrupt)  # the command's Ctrl-C, once started
    search: RateSearchDriver | None = None  # `--find-max-rate`
    engine: LoadEngine = field(init=False)  # the one `spec` asks for (`loadgen.load_engine`)

    def should_stop(self) -> bool:  # the loads' `stop=`: a signal, or a record not written
        return self.interrupt.requested or self.writer.failed is not None

    def __post_init__(self) -> None:
        self.writer = JsonlWriter(self.run.requests)
        self.engine = make_engine(
            self.spec,
            LoadContext(
                self.client,
                self.clock.start_ns,
                self.sink,
                self.should_stop,
                self.tokenizer,
                self.run.root,
                on_note=lambda text: print(text, file=sys.stderr),
            ),
        )

    @property
    def run(self) -> RunDir:
        return self.shared.run

    @property
    def clock(self) -> RunClock:
        return self.shared.clock

    @property
    def labels(self) -> tuple[tuple[str, str], ...]:
        """Added to every record, e.g. validate's ("phase", "soak")."""
        return self.spec.labels

    def sink(self, record: RequestRecord) -> None:
        with contextlib.suppress(OSError):  # a full disk stops the load, then is raised
            self.writer.write(record)
        self.records.append(record)
        self.all_records.append(record)
        if self.observer is not None:
            self.observer.request_finished(record)

    def run_level(self, index: int, at: _Level, schedule: Schedule) -> LevelResult:
        cfg = self.spec
        name, mode, value = at
        plan = LoadPlan(
            schedule=schedule,
            concurrency=round(value) if mode is LoadMode.CONCURRENCY else None,
            max_concurrency=cfg.max_concurrency,
            think_time_s=cfg.think_time_s,
            duration_s=cfg.duration_s,
            drain_timeout_s=cfg.drain_s,
            drain_settle_share=cfg.drain_settle_share,
            id_prefix=f"{self.tag}-{index}",
            labels=(("level", name), *self.labels),
            stop_on_saturation=cfg.stop_on_saturation
            and mode is LoadMode.RATE
            and not math.isinf(value),
        )
        if plan.watches_saturation and self.engine.load_engine == "locust" and not index:
            self.warnings.append(_LOCUST_UNWATCHED)
        self.records = []
        if self.observer is not None:
            self.observer.phase_started(name, duration_s=cfg.duration_s, num_requests=len(schedule))
        run = self.engine.run_level(plan)
        self.warnings += run.lost
        reports, interrupted = run.reports, run.interrupted
        saturation = _first_verdict(reports)
        summary = summarize(self.records, self.slos, seed=cfg.seed)
        level = LevelResult(
            name=name,
            mode=(LoadMode.CONCURRENCY if mode is LoadMode.CONCURRENCY else LoadMode.RATE).value,
            value=value
            if mode is not LoadMode.REPLAY
            else len(schedule) / max(_span(schedule), 1e-9),
            summary=summary,
            client=_diagnose(reports, self.records, summary.dispatch_lag),
            interrupted=interrupted,
            exhausted=any(r.exhausted for r in reports),
            num_backoffs=sum(r.num_backoffs for r in reports),
            prefix_reuse=prefix_reuse(self.records, run=self.all_records),
            stable=judge_stable(self.records, summary.window, saturation)
            if mode is LoadMode.RATE and not math.isinf(value)
            else None,
            saturation=saturation,
        )
        asked = (  # synthetic prompts only: a dataset's lengths are estimates, a history grows
            {f"{plan.id_prefix}-{s.index}": s.prompt_tokens for s in schedule.specs}
            if cfg.workload.kind in _SYNTHETIC_PROMPTS and schedule.sessions is None
            else {}
        )
        validity = level_validity(
            level,
            self.records,
            self.thresholds,
            exact_outputs=cfg.ignore_eos,
            asked_prompt_tokens=asked,
        )
        level = dataclasses.replace(level, validity=validity)
        if saturation is not None:
            self.warnings.append(_saturation_warning(level, saturation, reports, len(schedule)))
        self.levels.append(level)
        if judged := judge_level(cfg, self.records, value, name, self.client.model):
            self.verdicts.append(judged)  # `--standard mlperf`: LoadGen's Server verdict
        self.warnings += (
            caveats.level_warnings(level, exact_asked=cfg.ignore_eos)
            + caveats.tokenizer_warning(self.records)
            + caveats.retry_warning(self.records)
        )
        if self.observer is not None:
            self.observer.phase_ended(name, interrupted=interrupted)
        return level

    def result(self, interrupted: bool, knee: Knee | None) -> BenchResult:
        fit = self.fitting.sent(self.all_records) if self.fitting is not None else None
        return BenchResult(
            run_dir=self.run.root,
            spec=self.spec,
            levels=tuple(self.levels),
            knee=knee,
            interrupted=interrupted,
            warnings=tuple((fit.warnings() if fit else []) + self.warnings),
            wall_anchor_s=self.clock.wall_anchor_s,
            thresholds=self.thresholds,
            token_check=self.token_check,
            workload_fit=fit,
            standard=tuple(self.verdicts),
            max_rate=self.search.result(interrupted) if self.search is not None else None,
        )

    def check_tokens(self) -> None:
        """Count a sample of the first level's prompts with the server's `/tokenize`."""
        if self.first_schedule is None:
            return
        by_id = {r.id: r for r in self.all_records if r.ok}
        sample = []
        for spec in self.first_schedule.specs:
            record = by_id.get(f"{self.tag}-0-{spec.index}")
            if record is not None:
                usage = (
                    record.prompt_tokens
                    if record.prompt_tokens_source is TokenSource.USAGE
                    else None
                )
                sample.append((spec, usage))
            if len(sample) == _TOKEN_CHECK_SAMPLE:
                break
        if not sample:
            return
        check = tokencheck.check_tokens(
            base_url=self.spec.url,
            model=self.client.model,
            endpoint=self.client.endpoint,
            sample=sample,
            renderer=TextRenderer(self.tokenizer),
            headers=auth_headers(self.client.api_key, self.client.headers),
        )
        self.token_check = check
        self.warnings += tokencheck.token_check_warnings(
            check, have_tokenizer=self.tokenizer is not None
        )


_LOCUST_UNWATCHED = (
    "--locust-workers: rate levels are not watched for over-saturation (one event loop or "
    "--workers only); each runs to its end."
)


def _first_verdict(reports: Sequence[WorkerReport]) -> Saturation | None:
    """The earliest over-saturated verdict of the level's workers (each judges its share)."""
    verdicts = [r.saturation for r in reports if r.saturation is not None]
    return min(verdicts, key=lambda v: v.at_s) if verdicts else None


def _saturation_warning(
    level: LevelResult, verdict: Saturation, reports: Sequence[WorkerReport], scheduled: int
) -> str:
    stopped = sum(1 for r in reports if r.saturation is not None)
    workers = (
        f" (each of {len(reports)} workers judges its share: {stopped} stopped; the first's "
        "evidence)"
        if len(reports) > 1
        else ""
    )
    why = "its queue grew without bound" if verdict.rule == "queue" else "it fell behind"
    return (
        f"level {level.name} stopped early at {verdict.at_s:.1f} s{workers}, over-saturated "
        f"({why}): its figures cover the {level.summary.num_requests} of {scheduled} scheduled "
        "requests sent before the stop (--no-stop-on-saturation runs it to its end)."
    )


def _span(schedule: Schedule) -> float:
    offsets = schedule.offsets_s
    return float(offsets[-1] - offsets[0]) if offsets is not None and len(offsets) > 1 else 0.0


def _diagnose(
    reports: Sequence[WorkerReport],
    records: Sequence[RequestRecord],
    dispatch: Distribution | None,
) -> ClientDiagnostics:
    lag = describe([x for report in reports for x in report.loop_lag_s])
    cpu = sum(r.cpu_s for r in reports)
    wall = max((r.wall_s for r in reports), default=0.0)
    busiest = max((r.cpu_s / r.wall_s for r in reports if r.wall_s > 0), default=0.0)
    num_reads = sum(r.num_reads for r in reports)
    per_read = sum(r.num_events for r in reports) / num_reads if num_reads else None
    num_chunks = sum(len(r.chunks) for r in records)
    icl = [c2.ts - c1.ts for r in records for c1, c2 in zip(r.chunks, r.chunks[1:], strict=False)]
    verdict = judge_client(
        cpu_busiest=busiest,
        loop_lag_p99_s=lag.p99 if lag else None,
        dispatch_lag_p99_s=dispatch.p99 if dispatch is not None else None,
        icl_p50_s=float(np.median(icl)) if icl else None,
        events_per_read=per_read,
        behind=schedule_behind(records),
    )
    return ClientDiagnostics(
        num_workers=len(reports),
        uvloop=all(r.uvloop for r in reports) and bool(reports),
        cpu_s=cpu,
        wall_s=wall,
        cpu_busiest=busiest,
        loop_lag=lag,
        num_chunks=num_chunks,
        cpu_s_per_10k_chunks=cpu / num_chunks * 1e4 if num_chunks else None,
        events_per_read=per_read,
        client_bound=verdict.client_bound,
        host_busy=verdict.host_busy,
        reasons=verdict.reasons,
    )


def _environment(spec: BenchSpec, engine: LoadEngine, clock: RunClock) -> RunEnvironment:
    return RunEnvironment(
        infertriage=__version__,
        python=sys.version.split()[0],
        platform=platform.platform(),
        cpu_count=os.cpu_count(),
        uvloop=engine.uses_uvloop(),
        workers=spec.workers,
        load_engine=engine.load_engine,
        locust_workers=spec.locust_workers,
        # Joins the run's clock to same-host monotonic stamps (a server's own log).
        perf_counter_start_ns=clock.start_ns,
    )


def _write_info(session: _Session, info: ServerInfo, status: RunStatus, knee: Knee | None) -> None:
    result = session.result(status == "interrupted", knee)
    document = with_verdicts(bench_to_json(result, session.thresholds), result.standard)
    summary = {"status": status, **document}
    session.run.write_info(
        BenchRunInfo(
            wall_anchor_s=session.clock.wall_anchor_s,
            config=session.spec.run_config(),
            spec=session.spec.model_dump(mode="json"),
            environment=_environment(session.spec, session.engine, session.clock),
            server_config=_server_config(session, info),
            summary=BenchSummary.model_validate(summary),
        )
    )


def _server_config(session: _Session, info: ServerInfo) -> RunServerConfig:
    limit = session.fitting.limit if session.fitting is not None else None
    return RunServerConfig(
        models=list(info.models),
        max_model_len=limit.max_model_len if limit else None,
        max_model_len_source=limit.source if limit else None,
    )


def _finish(session: _Session, info: ServerInfo, interrupted: bool, knee: Knee | None) -> None:
    with JsonlWriter(session.run.signals) as signals:
        for level in session.levels:
            for signal in summary_signals(level.summary, source=f"bench:{level.name}"):
                signals.write(signal)
    write_csv(session.run.root, session.result(interrupted, knee), session.all_records)
    if session.verdicts:  # LoadGen's summary block, per level
        (session.run.root / SUMMARY_FILE).write_text(summary_file(session.verdicts))
    _write_info(session, info, "interrupted" if interrupted else "complete", knee)
    export_run(session.run.root, session.spec.exports)  # `--export` (none: nothing written)


def run_bench(
    spec: BenchSpec,
    *,
    observer: RunObserver | None = None,
    shared: SharedRun | None = None,
) -> BenchResult:
    """The `bench` command: load levels against `spec.url`, measured; see the module docstring.

    `shared`: write into this run directory, on this clock (a command's several loads share
    them) instead of creating `spec.out` (refused when it holds a run, unless `spec.force`).
    """
    spec = apply_standard(spec)  # `--standard mlperf`: its arrivals, duration, seed and SLOs
    asked = spec.client
    base = normalize_base_url(spec.url)
    engine_kind(spec)  # a spec that asks for two engines fails before any network
    levels = [_Level(*probe_level(spec))] if spec.find_max_rate else _levels(spec)
    if shared is None:
        check_out(spec.out, force=spec.force)  # refused before any request
    if spec.rates:
        parse_arrivals(spec.arrival, 1.0)  # a bad --arrival fails before any network
    thresholds = spec.thresholds or Thresholds()
    slos = parse_slos(spec.goodput) if spec.goodput else default_slos(thresholds)
    local_tokenizer = LocalTokenizer(asked.tokenizer) if asked.tokenizer is not None else None
    headers = auth_headers(asked.api_key, asked.header_pairs())
    info = preflight(base, headers, need_model=asked.model is None, limit_s=spec.probe_s)
    chosen = choose_model(asked.model, info, base)
    resolved = spec.model_copy(
        update={"url": base, "client": asked.model_copy(update={"model": chosen})}
    )
    client = client_config(resolved, keep_text=local_tokenizer is not None)
    shared = shared or SharedRun(RunDir.create(spec.out, prefix="bench", force=spec.force))
    session = _Session(resolved, client, shared, thresholds, slos, local_tokenizer, observer)
    limit = context_limit(info, chosen, asked.max_model_len)
    session.fitting = WorkloadFit(
        limit, info, model=chosen, endpoint=asked.endpoint, tokenizer=local_tokenizer
    )
    session.search = RateSearchDriver(resolved, slos) if spec.find_max_rate else None
    return _run_levels(session, info, levels, limit.max_model_len)


def _run_levels(
    session: _Session,
    info: ServerInfo,
    levels: list[_Level],
    max_len: int,
) -> BenchResult:
    with interruptible() as interrupt:
        session.interrupt = interrupt
        return _run_interruptibly(session, info, levels, max_len)


def _run_interruptibly(
    session: _Session,
    info: ServerInfo,
    levels: list[_Level],
    max_len: int,
) -> BenchResult:
    spec, knee, interrupted = session.spec, None, session.interrupt.requested
    _write_info(session, info, "running", None)
    try:
        index = 0
        while index < len(levels) and not interrupted:
            at_spec = level_spec(session.search, spec)  # the search sets a step's requests
            schedule = _schedule(
                at_spec, levels[index], max_model_len=max_len, tokenizer=session.tokenizer
            )
            if session.fitting is not None:  # prompt + max_tokens within the context
                schedule = session.fitting.fit(schedule)
            schedule = offered(session.search, schedule)  # each rate offered exactly
            session.first_schedule = session.first_schedule or schedule
            level = session.run_level(index, levels[index], schedule)
            caveats.stop_if_unauthorized(level)  # a key refused mid-run: no load reaches the model
            interrupted = level.interrupted or session.interrupt.requested
            if spec.sweep and index == 0:
                peak = level.summary.request_throughput
                levels += [_Level(f"rate={r:.3g}", LoadMode.RATE, r) for r in sweep_rates(peak)]
            levels += [_Level(*s) for s in next_levels(session.search, level, session.records)]
            index += 1
            _write_info(session, info, "running", None)
        if not interrupted and spec.check_tokens:
            session.check_tokens()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        session.writer.close()
    if session.writer.failed is not None:  # one sentence; the records before it are kept
        raise session.writer.failed
    interrupted = interrupted or session.interrupt.requested  # Ctrl-C in the token check too
    if spec.sweep and session.levels:
        probe = session.levels[0].summary.request_throughput
        knee = find_knee(probe, [lv for lv in session.levels[1:] if lv.mode == "rate"])
    _finish(session, info, interrupted, knee)
    return session.result(interrupted, knee)
