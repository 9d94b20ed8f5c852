"""api, level 5: the `validate` command — the go-live checklist.

Takes a `ValidateSpec` (`api.specs`): a server URL (or, with none, a twin
scenario it starts), the SLOs, the
production-like load (a workload, a `--rate` or `--concurrency`, a duration)
and the soak's length; does the functional probes, then the performance
level and the soak at a steady rate while the collector scrapes the server,
DCGM and the server process, then a drain; writes every request to
requests.jsonl (labelled `phase` performance or soak), metrics.jsonl,
validate.json (the checklist, and the steady window the performance level's
latency was judged over) and run.json; gives a `ValidateResult`, ready when
no check failed — the performance level's sample validity among them (an
INVALID level, too short or too small for its SLO claims, is never ready).
Its notes say which window was judged, and when the load client and the
server shared a saturated host (`diagnose.contention`), whose wait for a CPU
the latency checks then include. Ctrl-C (`api.interrupt`)
skips what is left, judges what ran and writes run.json with the status
`interrupted`; the twin is stopped last.

Server text is in its checks and notes (a probe's error, the id the server
gave a request, which a careless gateway fills with the key it was sent):
every check's detail and every note passes through the run's `Redactor`
(the key, each header, a `--url`'s `user:password@`) once, before the result
is written or returned, so validate.json, run.json, the Markdown and the
terminal all show the redacted text.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infertriage.analyze.golive.checks import (
    Phase,
    drain_check,
    performance_checks,
    stability_checks,
)
from infertriage.analyze.golive.request_ids import request_id_check
from infertriage.analyze.signals.metrics import Phases, metric_signals
from infertriage.analyze.stats.latency import steady_requests
from infertriage.api.bench import SharedRun, reach, run_bench
from infertriage.api.collect_thread import CollectedInfo
from infertriage.api.interrupt import Interrupt, interruptible
from infertriage.api.operations import (
    LONG_GENERATION_CHECK,
    cold_start_check,
    long_generation_check,
)
from infertriage.api.specs import BenchSpec, ValidateSpec
from infertriage.api.target import Target, collector_for, twin_target
from infertriage.diagnose import Evidence
from infertriage.diagnose.contention import contention
from infertriage.loadgen.caveats import stop_if_rejected
from infertriage.loadgen.probes import CheckResult, functional_checks
from infertriage.loadgen.results import RunObserver, in_phase, within
from infertriage.loadgen.standards import constraint_checks, judge_server, server_settings
from infertriage.net import redactor_of
from infertriage.report.mlperf import SUMMARY_FILE
from infertriage.schemas import (
    Check,
    CheckGroup,
    CheckStatus,
    Deployment,
    JudgedWindow,
    RequestRecord,
    RunClock,
    RunDir,
    Sample,
    Thresholds,
    UserError,
    ValidateConfig,
    ValidateRunInfo,
    ValidateSummary,
    Validity,
    check_out,
    checklist_ready,
    load_thresholds,
    validity_check,
    write_json,
)

__all__ = ["VALIDATE_SCHEMA", "ValidateResult", "ValidateSpec", "validate", "validate_to_json"]

VALIDATE_SCHEMA = "infertriage.validate/v1"
_IDLE_S = 1.5  # scrapes before the load: the idle KV usage the drain returns to
_DRAIN_S = 3.0  # after the last request: running, waiting and KV back to idle?
_DEFAULT_CONCURRENCY = 16
# With no --rate or --soak-rate the soak runs open-loop at half the closed loop's measured
# throughput: a steady load with headroom. At all of it the queue grows, as it must.
_SOAK_SHARE = 0.5
PERFORMANCE, SOAK = "performance", "soak"


@dataclass(frozen=True, slots=True)
class ValidateResult:
    run_dir: Path
    target: str
    checks: tuple[Check, ...]
    notes: tuple[str, ...]
    judged: JudgedWindow | None = None  # the performance level's steady window
    interrupted: bool = False  # Ctrl-C: the checks judge only what ran before it

    @property
    def ready(self) -> bool:
        return checklist_ready(self.checks)


def _functional(result: CheckResult) -> Check:
    status = {True: CheckStatus.PASS, False: CheckStatus.FAIL, None: CheckStatus.SKIP}[result.ok]
    figures = {"duration_s": result.duration_s}
    return Check(CheckGroup.FUNCTIONAL, f"functional.{result.name}", status, result.detail, figures)


def _by_phase(run: RunDir) -> dict[str, list[RequestRecord]]:
    records = run.iter_records(run.requests, RequestRecord) if run.requests.exists() else []
    phases: dict[str, list[RequestRecord]] = {PERFORMANCE: [], SOAK: []}
    for record in records:
        phases.setdefault(record.labels.get("phase", ""), []).append(record)
    return phases


def _skipped_stability(reason: str) -> list[Check]:
    names = ("leak", "drift", "errors")
    return [Check(CheckGroup.STABILITY, f"stability.{n}", CheckStatus.SKIP, reason) for n in names]


@dataclass(frozen=True, slots=True)
class _Load:
    """The spec with its load settled: `--rate` or `--concurrency` (16 when neither)."""

    spec: ValidateSpec
    rate: float | None
    concurrency: int | None
    thresholds: Thresholds
    observer: RunObserver | None = None  # the live view, told of each phase

    def performance(self, url: str) -> BenchSpec:
        """The performance level: `--rate` or `--concurrency`, for a duration or a count."""
        spec = self.spec
        return self._bench(url, PERFORMANCE).model_copy(
            update={
                "rates": (self.rate,) if self.rate else (),
                "concurrencies": (self.concurrency,) if self.concurrency else (),
                "duration_s": None if spec.num_requests else spec.duration_s,
                "num_requests": spec.num_requests,
                "standard": spec.standard,  # only this level is LoadGen's Server run
                "mlperf_model": spec.mlperf_model,
            }
        )

    def soak(self, url: str, rate: float) -> BenchSpec:
        """The soak: open loop at `rate` for `--soak`."""
        update = {"rates": (rate,), "duration_s": self.spec.soak_s}
        return self._bench(url, SOAK).model_copy(update=update)

    def _bench(self, url: str, phase: str) -> BenchSpec:
        spec = self.spec
        return BenchSpec(
            url=url,
            client=spec.client,
            workload=spec.workload,
            thresholds=self.thresholds,
            seed=spec.seed,
            drain_timeout_s=10.0,
            labels=(("phase", phase),),
            locust_workers=spec.locust_workers,
            locust_master_host=spec.locust_master_host,
        )


def _run_phases(
    target: Target, shared: SharedRun, load: _Load, interrupt: Interrupt
) -> tuple[Phase, CollectedInfo, Validity | None]:
    clock = shared.clock
    collector = collector_for(target, shared.run, clock, metrics_optional=True)
    collector.start()
    try:
        with in_phase(load.observer, "idle", duration_s=_IDLE_S):
            interrupt.wait(_IDLE_S)
        idle_end = clock.now_ts()
        observer = within(load.observer, PERFORMANCE)
        perf = run_bench(load.performance(target.url), observer=observer, shared=shared)
        validity = perf.levels[-1].validity if perf.levels else None  # the checklist's sample
        stop_if_rejected(perf)  # its line is in the error-rate check; over 2 % stops here
        if load.spec.soak_s > 0 and not interrupt.requested:
            measured = perf.levels[-1].summary.request_throughput if perf.levels else 0.0
            soak_rate = load.spec.soak_rate or load.rate or _SOAK_SHARE * measured
            if soak_rate <= 0:
                raise UserError("the performance level finished no request: no rate to soak at.")
            observer = within(load.observer, SOAK)
            soak = run_bench(load.soak(target.url, soak_rate), observer=observer, shared=shared)
            stop_if_rejected(soak)
        load_end = clock.now_ts()
        with in_phase(load.observer, "drain", duration_s=_DRAIN_S):
            interrupt.wait(_DRAIN_S)
    finally:
        collected = collector.stop()
    return Phase(idle_end, load_end, clock.now_ts()), collected, validity


def _load(
    rate: float | None, concurrency: int | None, soak_s: float, soak_rate: float | None
) -> tuple[float | None, int | None]:
    if rate is not None and concurrency is not None:
        raise UserError("give --rate or --concurrency, not both.")
    if soak_s < 0:
        raise UserError("--soak must not be negative.")
    if soak_rate is not None and soak_rate <= 0:
        raise UserError("--soak-rate must be positive.")
    if rate is None and concurrency is None:
        return None, _DEFAULT_CONCURRENCY
    return rate, concurrency


def validate(spec: ValidateSpec, *, observer: RunObserver | None = None) -> ValidateResult:
    """The `validate` command; see the module docstring. `observer`: a live view, told of
    each phase (starting the twin, functional, idle, performance, soak, drain)."""
    thresholds = load_thresholds(spec.slo)
    defaulted = spec.rate is None and spec.concurrency is None
    rate, concurrency = _load(spec.rate, spec.concurrency, spec.soak_s, spec.soak_rate)
    if spec.duration_s <= 0 and spec.num_requests is None:
        raise UserError("--duration must be positive.")
    if spec.standard:  # refused before any server starts
        server_settings(spec.mlperf_model)
        if rate is None:
            raise UserError("--standard mlperf runs LoadGen's Server scenario: give --rate.")
    load = _Load(spec, rate, concurrency, thresholds, observer)
    check_out(spec.out, force=spec.force)  # an --out holding a run is refused first
    if spec.url is not None:
        # then a server that cannot be reached, first
        reach(spec.url, spec.client.api_key, spec.client.header_pairs())
    run = RunDir.create(spec.out, prefix="validate", force=spec.force)
    shared = SharedRun(run)
    notes: list[str] = []
    if defaulted:
        notes.append(
            f"no --rate given: the performance level is a closed loop of {concurrency} "
            "streams; give your expected peak --rate for a production-like check."
        )
    # Ctrl-C is caught before the twin starts, and the twin is stopped after all is written.
    with interruptible() as interrupt, contextlib.ExitStack() as stack:
        with in_phase(observer if spec.url is None else None, "starting the twin"):
            target = stack.enter_context(_target(spec))
        with in_phase(observer, "cold start"):
            cold_start = cold_start_check(target, spec)  # before any other request
        checks = _functional_checks(spec, target.url, observer)
        phase, collected, validity = _run_phases(target, shared, load, interrupt)
        checks += [cold_start, _long_generation(target, spec, run, (thresholds, interrupt))]
        checks.append(validity_check(validity))  # an INVALID performance level: never ready
        if interrupt.requested:
            notes.append("interrupted (Ctrl-C): the checks judge only what ran before it.")
        measured = _measured(run, phase, thresholds, spec.soak_s, spec.seed)
        measured.checks.extend(_standard_checks(spec, load.rate, run, target.name))
        notes += measured.notes
        if (run.root / SUMMARY_FILE).exists():
            notes.append(f"MLPerf LoadGen's summary of the performance level: {SUMMARY_FILE}.")
        result = _redacted(
            spec,
            ValidateResult(
                run.root,
                target.name,
                (*checks, *measured.checks),
                tuple(notes),
                measured.judged,
                interrupted=interrupt.requested,
            ),
        )
        _write(run, shared.clock, result, load, collected)
    return result


def _redacted(spec: ValidateSpec, result: ValidateResult) -> ValidateResult:
    """The result with the run's secrets out of every detail, note and the target's name."""
    client = spec.client
    redact = redactor_of(client.api_key, client.header_pairs())
    if not redact:
        return result
    return dataclasses.replace(
        result,
        target=redact(result.target),
        checks=tuple(dataclasses.replace(c, detail=redact(c.detail)) for c in result.checks),
        notes=tuple(redact(note) for note in result.notes),
    )


def _long_generation(
    target: Target, spec: ValidateSpec, run: RunDir, judged: tuple[Thresholds, Interrupt]
) -> Check:
    """The longest generation through what fronts the server, when asked (after the load)."""
    thresholds, interrupt = judged
    name, group = LONG_GENERATION_CHECK, CheckGroup.OPERATIONS
    if spec.long_generation_max_s <= 0:
        reason = (
            "not run: add --long-generation-max-s 120 to send the longest generation the "
            "server allows and see whether a gateway's timeout cuts it."
        )
        return Check(group, name, CheckStatus.SKIP, reason)
    if interrupt.requested:
        return Check(group, name, CheckStatus.SKIP, "the run was interrupted before it.")
    return long_generation_check(target.url, spec, run.root / "long_generation", thresholds)[0]


def _functional_checks(spec: ValidateSpec, url: str, observer: RunObserver | None) -> list[Check]:
    if not spec.functional:
        return []
    client = spec.client
    with in_phase(observer, "functional"):
        found = functional_checks(
            url,
            client.model,
            api_key=client.api_key,
            headers=client.header_pairs(),
            max_model_len=client.max_model_len,
        )
    return [_functional(c) for c in found]


def _target(spec: ValidateSpec) -> contextlib.AbstractContextManager[Target]:
    """The server to validate: the one at `--url`, or a twin started for the run."""
    if spec.url is None:  # with the scenario's own load time: its cold start is measured
        return twin_target(spec.scenario, load_time_s=None)
    url = spec.url
    return contextlib.nullcontext(
        Target(
            url, spec.metrics_url, spec.dcgm_url, spec.server_pid, Deployment(), url, profile=False
        )
    )


@dataclass(frozen=True, slots=True)
class _Measured:
    checks: list[Check]
    judged: JudgedWindow | None  # the performance level's steady window, which its checks judge
    notes: list[str]


def _measured(
    run: RunDir, phase: Phase, thresholds: Thresholds, soak_s: float, seed: int
) -> _Measured:
    phases = _by_phase(run)
    performance = phases[PERFORMANCE]
    checks = [
        request_id_check(performance),
        *performance_checks(performance, thresholds, seed=seed),
    ]
    judged = steady_requests(performance)[1] if performance else None
    samples: list[Sample] = (
        list(run.iter_records(run.metrics, Sample)) if run.metrics.exists() else []
    )
    notes = [f"performance {judged.describe()}."] if judged is not None else []
    notes += _contention_note(samples, phase, thresholds)
    soak = phases[SOAK]
    if soak:
        return _Measured(checks + stability_checks(soak, samples, phase, thresholds), judged, notes)
    reason = (
        "the run was interrupted before the soak began."
        if soak_s > 0
        else "no soak was run: add --soak (e.g. --soak 30m)."
    )
    skipped = _skipped_stability(reason)
    return _Measured([*checks, *skipped, drain_check(samples, phase)], judged, notes)


def _standard_checks(spec: ValidateSpec, rate: float | None, run: RunDir, sut: str) -> list[Check]:
    """`--standard mlperf`: LoadGen's constraints on the performance level, as checks."""
    performance = _by_phase(run)[PERFORMANCE]
    if not spec.standard or rate is None or not performance:
        return []
    settings = server_settings(spec.mlperf_model, target_qps=rate)
    name = spec.client.model or sut
    return constraint_checks(judge_server(performance, settings, level=PERFORMANCE, sut_name=name))


def _contention_note(samples: list[Sample], phase: Phase, thresholds: Thresholds) -> list[str]:
    """A note when the load client and the server shared a saturated host during the load."""
    window = Phases(load_start_ts=phase.idle_end_ts, load_end_ts=phase.load_end_ts)
    reason = contention(Evidence.of(metric_signals(samples, window)), thresholds)
    if not reason:
        return []
    return [
        f"{reason}: the latency checks include the wait for a CPU; rerun the load from another "
        "host (`--url http://SERVER:PORT` from a second machine) to judge the server alone."
    ]


def validate_to_json(result: ValidateResult) -> dict[str, Any]:
    return {
        "schema": VALIDATE_SCHEMA,
        "target": result.target,
        "ready": result.ready,
        "interrupted": result.interrupted,
        "run_dir": str(result.run_dir),
        "notes": list(result.notes),
        "judged": result.judged.model_dump(mode="json") if result.judged else None,
        "checks": [
            {
                "group": c.group.value,
                "name": c.name,
                "status": c.status.value,
                "detail": c.detail,
                "figures": c.figures,
            }
            for c in result.checks
        ],
    }


def _write(
    run: RunDir, clock: RunClock, result: ValidateResult, load: _Load, collected: CollectedInfo
) -> None:
    document = validate_to_json(result)
    write_json(run.root / "validate.json", document)
    spec = load.spec
    config = ValidateConfig(
        target=result.target,
        rate=load.rate,
        concurrency=load.concurrency,
        duration_s=spec.duration_s,
        num_requests=spec.num_requests,
        soak_s=spec.soak_s,
        workload=spec.workload,
        seed=spec.seed,
    )
    run.write_info(
        ValidateRunInfo(
            wall_anchor_s=clock.wall_anchor_s,
            config=config,
            spec=spec.model_dump(mode="json"),
            environment=collected.environment,
            server_config=collected.server_config,
            summary=ValidateSummary(
                status="interrupted" if result.interrupted else "complete",
                ready=result.ready,
                main_level=PERFORMANCE,
                checks=list(result.checks),
            ),
        )
    )
