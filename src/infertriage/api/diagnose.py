"""api, level 5: the `diagnose` command — the whole pipeline, load to bottleneck map.

Takes a `DiagnoseSpec` (`api.specs`): a server URL (or, with none, a twin
scenario it starts), the load's duration, what else to watch (metrics, DCGM,
the server's pid, traces) and the SLOs; does warm-up, a concurrency sweep
(1, ¼ of `--concurrency`, then it: 16 by default), one open-loop step above
the measured maximum and a drain — each load one `bench` (`BenchSpec`) into
one run on one clock — while the collector scrapes the server, DCGM and the
host; captures a profile at the busiest step (the twin always does); then
turns requests.jsonl, metrics.jsonl and the traces into signals.jsonl and
the diagnosis (diagnosis.json). `--from-run` redoes the second half from a
run directory of any command (`api.runview`); `--metrics-file` diagnoses one
scrape. Ctrl-C (`api.interrupt`) skips the phases not yet begun, and the map
is drawn from the last level that finished a request (run.json's status says
`interrupted`); the twin is stopped last. `--html F` then writes the run's
HTML report (`api.report`) to F.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from infertriage.analyze.signals.client import judged_window, measured_records
from infertriage.analyze.signals.metrics import Phases, metric_signals
from infertriage.analyze.signals.reuse import prefix_reuse
from infertriage.analyze.stats.latency import ClientVerdict
from infertriage.analyze.stats.outcomes import is_incomplete
from infertriage.api.bench import SharedRun, reach, run_bench
from infertriage.api.capture import (
    Listing,
    ProfileWindow,
    check_files,
    keep_logs,
    take_profiles,
)
from infertriage.api.exports import export_run
from infertriage.api.fleet import check_fleet, read_fleet
from infertriage.api.fromrun import evidence_added
from infertriage.api.interrupt import Interrupt, interruptible
from infertriage.api.report import check_html_path, write_report
from infertriage.api.run_signals import COMPARE_FILE, kept_logs, signals_of_run, slowest_in_logs
from infertriage.api.runview import (
    RunView,
    finished,
    load_phases,
    measured_view,
    run_spec,
    run_target,
)
from infertriage.api.spans import settle_spans, span_receiver, with_span_join
from infertriage.api.specs import BenchSpec, DiagnoseSpec, ReportSpec, ValidateSpec
from infertriage.api.target import Target, TargetContext, collector_for, twin_target
from infertriage.api.topology import keep_interconnect
from infertriage.collect import adapt_scrape, detect, parse_metrics_text, read_metrics_file
from infertriage.collect.scraper import samples_of
from infertriage.diagnose import Evidence, diagnose_evidence
from infertriage.loadgen.caveats import stop_if_rejected
from infertriage.loadgen.results import BenchResult, RunObserver, in_phase, within
from infertriage.loadgen.runner import DRAIN_SETTLE_GRACE_S
from infertriage.loadgen.spec import default_workload
from infertriage.loadgen.validity import LevelFacts, judge_validity, nominal_of
from infertriage.schemas import (
    Deployment,
    DiagnoseConfig,
    DiagnoseRunInfo,
    DiagnoseSummary,
    Diagnosis,
    Interrupted,
    JsonlWriter,
    RequestRecord,
    RunClock,
    RunDir,
    RunEnvironment,
    RunServerConfig,
    RunStatus,
    Signal,
    Thresholds,
    UserError,
    Validity,
    check_out,
    load_thresholds,
    write_json,
)
from infertriage.twin.scenario import load_scenario
from infertriage.workload import WorkloadSpec, parse_workload

__all__ = [
    "COMPARE_FILE",
    "DiagnoseResult",
    "DiagnoseSpec",
    "diagnose",
    "keep_compare_run",
    "keep_traces",
]


# The sweep's last level is the measured one: SLOs, server histograms and KV use are read
# over it; the overload step after it shows whether the queue grows without bound.
_CONCURRENCY = 16
_OVERLOAD_FACTOR = 1.5
_DRAIN_S = 2.0  # after the load: does the KV cache return to idle?
_DRAIN_TIMEOUT_S = 3.0  # a warm-up or overload level waits this long for its last streams
# The measured level waits longer: a stream it cuts never reaches the server's per-request
# histograms (queue and prefill time are observed at the finish), so a slow server's map
# would lose exactly the evidence that explains it (bench's default drain). It settles
# once 90 % of its requests have finished and the rest all have their first token
# (`runner.drain_deadline_ns`: a second later, what still runs is cut): the longest
# outputs' tails cost a run 10-15 s and would tell the map little it lacks; while more
# than 10 % run (that slow server) or one has no token yet (its TTFT), it waits.
_MEASURED_DRAIN_TIMEOUT_S = 30.0
_MEASURED_DRAIN_SETTLE = 0.9
_MIN_LEVEL_S = 1.0


@dataclass(frozen=True, slots=True)
class Capture:
    """What is captured beside the load: a profile of the measured level, the server's logs."""

    profile_s: float | None = None  # None: the whole measured level
    profile_dir: Path | None = None  # where the server writes its traces, on this host
    logs: tuple[Path, ...] = ()
    profiles_in_run: bool = False  # the twin writes its traces into raw/ itself


@dataclass(frozen=True, slots=True)
class _Sweep:
    """diagnose's loads: each one `bench` (this client, workload and SLOs) into one run."""

    bench: BenchSpec  # the levels left empty: each load sets its own
    shared: SharedRun
    duration_s: float
    concurrency: int
    observer: RunObserver | None = None  # the live view, told of each phase

    def load(
        self,
        phase: str,
        *,
        rates: tuple[float, ...] = (),
        concurrencies: tuple[int, ...] = (),
        duration_s: float,
        measured: bool = False,
    ) -> BenchResult:
        """One load; the measured level's drain waits longer for its streams, and settles."""
        spec = self.bench.model_copy(
            update={
                "rates": rates,
                "concurrencies": concurrencies,
                "duration_s": duration_s,
                "drain_timeout_s": _MEASURED_DRAIN_TIMEOUT_S if measured else _DRAIN_TIMEOUT_S,
                "drain_settle_share": _MEASURED_DRAIN_SETTLE if measured else None,
                # the overload phase (the one rate load) overloads on purpose: its queue
                # is the evidence, not a reason to stop
                "stop_on_saturation": False,
            }
        )
        return run_bench(spec, observer=within(self.observer, phase), shared=self.shared)

    def drain(self, interrupt: Interrupt) -> None:
        """After the load: does the KV cache return to idle?"""
        with in_phase(self.observer, "drain", duration_s=_DRAIN_S):
            interrupt.wait(_DRAIN_S)


@dataclass(frozen=True, slots=True)
class DiagnoseResult:
    run_dir: Path | None
    diagnosis: Diagnosis
    target: str  # the URL, "twin:<scenario>" or the metrics file
    notes: tuple[str, ...] = ()
    interrupted: bool = False  # Ctrl-C: the map judges only what was measured before it
    html: Path | None = None  # `--html`: the run's HTML report, written after the map
    workload: str = ""  # one line on the prompts sent: their prefix reuse (`PrefixReuse.describe`)


def _level_s(duration_s: float) -> tuple[float, float, float]:
    """The duration shared out: warm-up levels ⅙ each, the measured level and overload ⅓ each."""
    return (
        max(_MIN_LEVEL_S, duration_s / 6),
        max(_MIN_LEVEL_S, duration_s / 3),
        max(_MIN_LEVEL_S, duration_s / 3),
    )


def _best_rate(results: Sequence[BenchResult]) -> float:
    rates = [level.summary.request_throughput for r in results for level in r.levels]
    return max([rate for rate in rates if rate > 0], default=1.0)


def sweep_of(concurrency: int) -> tuple[int, ...]:
    """The warm-up levels and the measured one: 1, a quarter of it, then it (16 → 1, 4, 16)."""
    return tuple(sorted({1, max(1, concurrency // 4), concurrency}))


@dataclass(slots=True)
class _Loads:
    """The loads `_measure` ran, in order; those Ctrl-C came before stay None."""

    warm: BenchResult | None = None
    main: BenchResult | None = None
    overload: BenchResult | None = None
    window: ProfileWindow | None = None
    profiling: bool = False
    rejected: list[str] = field(default_factory=list)

    @property
    def swept(self) -> list[str]:
        """The sweep's level names, warm-up first: the last is the measured one."""
        return [lv.name for r in (self.warm, self.main) if r is not None for lv in r.levels]

    def client_bound(self, level: str) -> bool:
        levels = [lv for r in (self.warm, self.main, self.overload) if r for lv in r.levels]
        return any(lv.client.client_bound for lv in levels if lv.name == level)


def _run_loads(target: Target, sweep: _Sweep, capture: Capture, interrupt: Interrupt) -> _Loads:
    """Warm-up, the measured level, overload and the drain; Ctrl-C skips what is left."""
    warm_s, level_s, overload_s = _level_s(sweep.duration_s)
    concurrency = sweep.concurrency
    loads = _Loads()
    loads.warm = sweep.load("warm-up", concurrencies=sweep_of(concurrency)[:-1], duration_s=warm_s)
    loads.rejected += stop_if_rejected(loads.warm)  # a load refused as invalid measures nothing
    if interrupt.requested:
        return loads
    loads.window = (
        ProfileWindow(target.url, capture.profile_s, capture.profile_dir)
        if target.profile
        else None
    )
    loads.profiling = loads.window is not None and loads.window.start()
    try:
        loads.main = sweep.load(
            "measure",
            concurrencies=(concurrency,),
            duration_s=level_s,
            measured=True,
        )
    finally:
        if loads.window is not None:
            loads.window.stop()
    loads.rejected += stop_if_rejected(loads.main)
    if interrupt.requested:
        return loads
    overload_rate = _OVERLOAD_FACTOR * _best_rate((loads.warm, loads.main))
    loads.overload = sweep.load("overload", rates=(overload_rate,), duration_s=overload_s)
    loads.rejected += stop_if_rejected(loads.overload)
    sweep.drain(interrupt)
    return loads


@dataclass(frozen=True, slots=True)
class _Measured:
    """What `_measure` gives run.json: the phases (None when Ctrl-C left no finished request),
    the levels run, the measured one, and what the collector read beside the load."""

    phases: Phases | None
    levels: list[str]
    main_level: str | None
    client_bound: bool
    server_config: RunServerConfig
    environment: RunEnvironment
    notes: list[str]


def _measure(target: Target, sweep: _Sweep, capture: Capture, interrupt: Interrupt) -> _Measured:
    """The load and the collection beside it; phases None when Ctrl-C left no finished request."""
    run, clock = sweep.shared.run, sweep.shared.clock
    collector = collector_for(target, run, clock)
    collector.start()
    loads = _Loads()
    try:
        loads = _run_loads(target, sweep, capture, interrupt)
    finally:
        collected = collector.stop()
    window = loads.window
    notes = (list(window.notes) if window is not None else []) + loads.rejected
    if loads.profiling and window is not None:
        notes += _take_profiles(run, capture, window.before)
    notes += keep_logs(run, capture.logs)
    records = _records(run)
    main_name = _measured_level(records, loads, interrupted=interrupt.requested)
    over = loads.overload.levels[-1].name if loads.overload and loads.overload.levels else None
    phases = None
    if main_name is not None or not interrupt.requested:  # no level at all: say so
        mine = [r for r in records if r.labels.get("level") == main_name]
        overload = [r for r in records if over is not None and r.labels.get("level") == over]
        phases = load_phases(mine, overload, clock.now_ts())
        notes += cut_note(mine, _MEASURED_DRAIN_TIMEOUT_S, _MEASURED_DRAIN_SETTLE)
    server_config = collected.server_config
    if target.prometheus is not None and phases is not None:
        server_config = read_fleet(run, clock, target, phases)
    levels = [lv.name for r in (loads.warm, loads.main, loads.overload) if r for lv in r.levels]
    return _Measured(
        phases=phases,
        levels=levels,
        main_level=main_name,
        client_bound=loads.client_bound(main_name or ""),
        server_config=server_config,
        environment=collected.environment,
        notes=notes,
    )


def cut_note(
    mine: Sequence[RequestRecord], drain_timeout_s: float, settle_share: float | None
) -> list[str]:
    """A note when the measured level ended with streams still running (cut by the run)."""
    cut = sum(1 for r in mine if is_incomplete(r))
    if not cut:
        return []
    when = f"{drain_timeout_s:.0f} s after it ended"
    if settle_share is not None:
        when = (
            f"{DRAIN_SETTLE_GRACE_S:.0f} s after {settle_share:.0%} of it had finished (each "
            f"of them past its first token), or {when}"
        )
    return [
        f"{cut} of {len(mine)} requests of the measured level were still streaming "
        f"{when}, and were cut: TTFT and ITL count what they measured, but the server's "
        "per-request histograms (queue and prefill time, observed at the finish) do not; a "
        "longer --duration or shorter outputs (--workload) measure them."
    ]


def _measured_level(
    records: Sequence[RequestRecord], loads: _Loads, *, interrupted: bool
) -> str | None:
    """The sweep's last level; after Ctrl-C, the last one that finished a request (or None)."""
    swept = loads.swept
    if not interrupted:
        return swept[-1] if loads.main is not None and swept else None
    done = {r.labels.get("level") for r in records if finished(r)}
    return next((name for name in reversed(swept) if name in done), None)


def _take_profiles(run: RunDir, capture: Capture, before: Listing) -> list[str]:
    """Copy the profile the server wrote into the run; notes on what could not be."""
    if capture.profiles_in_run:
        return []
    if capture.profile_dir is None:
        return [
            "the server wrote its trace where VLLM_TORCH_PROFILER_DIR points: pass "
            "--profile-dir DIR when that is on this host, or the file to --trace later."
        ]
    if not take_profiles(capture.profile_dir, before, run):
        return [f"no trace appeared under {capture.profile_dir} after /stop_profile."]
    return []


def _records(run: RunDir) -> list[RequestRecord]:
    return list(run.iter_records(run.requests, RequestRecord))


def keep_traces(run: RunDir, traces: Sequence[Path]) -> None:
    """Copy `--trace` files into the run, so `--from-run` finds them; a bad path fails first."""
    check_files(traces, "--trace")
    target = run.raw / "traces"
    target.mkdir(parents=True, exist_ok=True)
    for index, path in enumerate(traces):
        shutil.copyfile(path, target / f"{index:02d}-{path.name}")


def _other_run_signals(other: Path) -> dict[str, float]:
    """The signals of the run `--compare-run` names; a clear error when it has none."""
    try:
        found = RunDir.open(other)
        found.read_info()  # a run.json that does not parse is no run, whatever lies beside it
    except UserError as err:
        raise UserError(f"--compare-run: {err}") from err
    if not found.signals.is_file():
        raise UserError(
            f"--compare-run {other} has no signals.jsonl: diagnose it first "
            f"(`infertriage diagnose --from-run {other}`)."
        )
    return {s.name: s.value for s in found.iter_records(found.signals, Signal)}


def keep_compare_run(run: RunDir, other: Path, values: dict[str, float]) -> None:
    """Snapshot the other run's signals into this one (raw/compare-run.json) for --from-run."""
    run.raw.mkdir(parents=True, exist_ok=True)
    write_json(run.raw / COMPARE_FILE, {"path": str(other.resolve()), "signals": values})


def _diagnose_run(
    run: RunDir, thresholds: Thresholds, target: str, view: RunView | None = None
) -> DiagnoseResult:
    view = view or measured_view(run)
    records, logs = view.records, kept_logs(run)
    signals = signals_of_run(run, view, logs)
    if run.signals.exists():
        run.signals.unlink()
    with JsonlWriter(run.signals) as writer:
        for signal in signals:
            writer.write(signal)
    engine = view.info.server_config.engine
    diagnosis = diagnose_evidence(Evidence.of(signals, engine), thresholds)
    if records:  # say which window the client's SLO figures were judged over, and if it can
        judged = {"judged": judged_window(records), "validity": _validity(view, thresholds)}
        diagnosis = diagnosis.model_copy(update=judged)
    slowest = slowest_in_logs(logs, view)
    if slowest:
        diagnosis = diagnosis.model_copy(update={"slowest": slowest})
    diagnosis = with_span_join(diagnosis, run, records)  # --otlp-listen, --spans
    write_json(run.diagnosis, diagnosis)
    reuse = prefix_reuse(records, run=view.run_records)
    line = reuse.describe() if reuse is not None and reuse.reused_tokens else ""
    return DiagnoseResult(run.root, diagnosis, target, notes=view.notes, workload=line)


def _validity(view: RunView, thresholds: Thresholds) -> Validity:
    """The measured level's validity, judged on the records the SLO line judges."""
    mode, value = nominal_of(view.records[0].labels.get("level", "") if view.records else "")
    bound = ClientVerdict(True, False, ("the run recorded the load client as the bottleneck",))
    facts = LevelFacts(
        mode=mode,
        value=value,
        exact_outputs=view.info.spec.get("ignore_eos", True) is not False,
        client=bound if view.client_bound else None,
    )
    return judge_validity(measured_records(view.records), thresholds, facts)


def diagnose_metrics_file(path: Path, thresholds: Thresholds) -> DiagnoseResult:
    """One scrape: gauges only, at one instant; rules that need load or rates say `unknown`.

    The notes say what of the file was not read as given: a cut end left out, copies of one
    series read once, values that cannot be true set aside (the map's artefact finding).
    """
    exposition = parse_metrics_text(read_metrics_file(path), str(path))
    detection = detect(exposition)
    adapted = adapt_scrape(exposition, detection)
    samples = samples_of(0.0, adapted)
    signals = metric_signals(samples, Phases(load_start_ts=0.0, load_end_ts=0.0))
    engine = detection.engine.engine if detection.engine else None
    diagnosis = diagnose_evidence(Evidence.of(signals, engine), thresholds)
    notes = (*exposition.notes, *(note for one in adapted for note in one.scrape_notes))
    return DiagnoseResult(None, diagnosis, str(path), notes=notes)


def diagnose(spec: DiagnoseSpec, *, observer: RunObserver | None = None) -> DiagnoseResult:
    """The `diagnose` command; see the module docstring. `observer`: a live view, told of
    each phase (starting the twin, warm-up, measure, overload, drain, analysis)."""
    if spec.exports and spec.metrics_file is not None:
        raise UserError("--export needs a run directory; --metrics-file diagnoses one scrape.")
    result = _diagnose(spec, observer)
    if result.run_dir is not None:  # `--export`: vLLM's and AIPerf's files of its levels
        export_run(result.run_dir, spec.exports)
    if spec.html is None or result.run_dir is None:
        return result
    written = write_report(ReportSpec(run=result.run_dir, html=spec.html))
    return dataclasses.replace(result, html=written.html)


def _diagnose(spec: DiagnoseSpec, observer: RunObserver | None) -> DiagnoseResult:
    if spec.html is not None:  # a path that cannot be written fails before any load
        if spec.metrics_file is not None:
            raise UserError("--html needs a run directory; --metrics-file diagnoses one scrape.")
        check_html_path(spec.html)
    if spec.from_run is not None:
        return _diagnose_from_run(spec, spec.from_run)
    thresholds = load_thresholds(spec.slo)
    if spec.metrics_file is not None:
        return diagnose_metrics_file(spec.metrics_file, thresholds)
    if spec.duration_s <= 0:
        raise UserError("--duration must be positive.")
    if spec.concurrency < 1:
        raise UserError("--concurrency must be at least 1.")
    _check_capture(spec.profile_s, spec.profile_dir, spec.logs)
    if spec.prometheus is not None:
        if spec.url is None:
            raise UserError("--prometheus needs --url: the address the fleet serves on.")
        check_fleet(spec.prometheus, spec.selector)
    # the other run is read before any load: a bad path fails first
    compare_run = spec.compare_run
    other = _other_run_signals(compare_run) if compare_run is not None else None
    check_out(spec.out, force=spec.force)  # an --out holding a run is refused first
    if spec.url is not None:
        # then a server that cannot be reached, first
        reach(spec.url, spec.client.api_key, spec.client.header_pairs())
    # a twin scenario's documented load when no --workload was given (a bad one fails here)
    spec = spec.model_copy(update={"workload": load_workload(spec)})
    run = RunDir.create(spec.out, prefix="diagnose", force=spec.force)
    if compare_run is not None and other is not None:
        keep_compare_run(run, compare_run, other)
    keep_traces(run, spec.traces)
    keep_interconnect(run.raw, spec.nvidia_smi_topo, spec.nccl_tests)
    shared = SharedRun(run)  # the clock starts before the twin does
    capture = Capture(spec.profile_s, spec.profile_dir, spec.logs, profiles_in_run=spec.url is None)
    # Ctrl-C is caught before the twin starts, and the twin is stopped after all is written.
    with interruptible() as interrupt, contextlib.ExitStack() as stack:
        spans = stack.enter_context(span_receiver(spec, run))  # before the twin: its endpoint
        with in_phase(observer if spec.url is None else None, "starting the twin"):
            target = stack.enter_context(_target(spec, run, spans.endpoint if spans else None))
        bench = BenchSpec(
            url=target.url,
            client=spec.client,
            workload=load_workload(spec),
            thresholds=thresholds,
            drain_timeout_s=_DRAIN_TIMEOUT_S,
            locust_workers=spec.locust_workers,
            locust_master_host=spec.locust_master_host,
        )
        sweep = _Sweep(bench, shared, spec.duration_s, spec.concurrency, observer)
        measured = _measure(target, sweep, capture, interrupt)
        measured.notes.extend(settle_spans(spans, run, interrupt))
        status: RunStatus = "interrupted" if interrupt.requested else "complete"
        run.write_info(_run_info(shared.clock, spec, target, measured, status))
        if measured.phases is None:
            raise Interrupted(
                f"no request finished before the interrupt, so there is nothing to diagnose; "
                f"what was sent is kept in {run.root}."
            )
        with in_phase(observer, "analysis"):
            result = _diagnose_run(run, thresholds, target.name)
        interrupted = interrupt.requested
    return dataclasses.replace(result, notes=tuple(measured.notes), interrupted=interrupted)


def load_workload(spec: DiagnoseSpec) -> WorkloadSpec:
    """The workload to send: `--workload`, else a twin scenario's documented one
    (`workload:` in its file), else the chat mix."""
    if spec.workload is not None:
        return spec.workload
    documented = load_scenario(spec.scenario).workload if spec.url is None else None
    if documented is None:
        return default_workload()
    try:
        return parse_workload(documented)
    except UserError as err:
        raise UserError(f"the workload of scenario {spec.scenario}: {err}") from err


def _diagnose_from_run(spec: DiagnoseSpec, from_run: Path) -> DiagnoseResult:
    """The map of a run on disk, judged by `slo`, else by the SLOs the run was made with."""
    run, compare_run, slo = RunDir.open(from_run), spec.compare_run, spec.slo
    other = _other_run_signals(compare_run) if compare_run is not None else None
    view = measured_view(run)  # a run it cannot read says so before anything is written
    stored = run_spec(view.info)
    stored_slo = stored.slo if isinstance(stored, DiagnoseSpec | ValidateSpec) else None
    thresholds = load_thresholds(slo if slo is not None or stored_slo is None else stored_slo)
    with evidence_added(spec, run):  # an option it would ignore is refused; --trace, --log kept
        if compare_run is not None and other is not None:
            keep_compare_run(run, compare_run, other)
        return _diagnose_run(run, thresholds, run_target(view.info, str(from_run)), view)


def _target(spec: DiagnoseSpec, run: RunDir, otlp: str | None) -> TargetContext:
    """The server to diagnose: the one at `--url`, or a twin started for the run."""
    if spec.url is None:
        return twin_target(spec.scenario, run.raw, otlp_endpoint=otlp)
    url, profile = spec.url, spec.profile_s is not None
    given = Target(
        url,
        spec.metrics_url,
        spec.dcgm_url,
        spec.server_pid,
        Deployment.model_validate(spec.deployment),
        url,
        profile,
    )
    fleet = dataclasses.replace(given, prometheus=spec.prometheus, selector=spec.selector)
    return contextlib.nullcontext(fleet)


def _run_info(
    clock: RunClock, spec: DiagnoseSpec, target: Target, measured: _Measured, status: RunStatus
) -> DiagnoseRunInfo:
    config = DiagnoseConfig(
        target=target.name,
        deployment=target.deployment,
        levels=measured.levels,
        workload=load_workload(spec).text,
        notes=measured.notes,
    )
    return DiagnoseRunInfo(
        wall_anchor_s=clock.wall_anchor_s,
        config=config,
        spec=spec.model_dump(mode="json"),
        environment=measured.environment,
        server_config=measured.server_config,
        summary=DiagnoseSummary(
            status=status,
            phases=measured.phases,
            main_level=measured.main_level,
            client_bound=measured.client_bound,
        ),
    )


def _check_capture(profile_s: float | None, profile_dir: Path | None, logs: Sequence[Path]) -> None:
    if profile_s is not None and profile_s <= 0:
        raise UserError("--profile must be a positive number of seconds.")
    if profile_dir is not None and not profile_dir.is_dir():
        raise UserError(f"--profile-dir {profile_dir} is not a folder.")
    check_files(logs, "--log")
