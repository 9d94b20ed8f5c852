"""api, level 5: `report RUN [--html F]` — any run directory as one self-contained HTML file.

Takes a `ReportSpec` (`api.specs`): a run directory of diagnose, bench,
validate or `compare --url A --url B`, and where to write (default
RUN/report.html). Reads run.json, requests.jsonl, metrics.jsonl,
signals.jsonl and diagnosis.json (each where the run has it) into a
`report.html.RunReport` — the map with its evidence and next steps, the
SLOs, each level's (or A/B arm's) latency summary and raw TTFT and ITL, the
time series with the levels as bands, the trace signals, validate's
checklist, bench's goodput search (run.json's `max_rate`), each level's
over-saturation verdict (`saturation`) and MLPerf LoadGen block
(mlperf_log_summary.txt, else the level's `mlperf`) and, for an A/B run, the
comparison recomputed from its records (`analyze.compare`, with the run's
threshold and seed) with compare.json's sample plan and looks — and writes
the page; a run from before any of these keys renders without them. A run
with no map says which command draws one. `diagnose --html F` calls
`write_report` on the run it just diagnosed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from infertriage.analyze.compare.comparison import compare_records
from infertriage.analyze.stats.latency import default_slos, itl_samples, summarize
from infertriage.api.runview import RunSummary, group_key, run_spec, run_target
from infertriage.api.specs import BenchSpec, CompareABSpec, DiagnoseSpec, ReportSpec, ValidateSpec
from infertriage.loadgen.validity import LevelFacts, judge_validity, nominal_of
from infertriage.report.bench import level_slos
from infertriage.report.compare import CompareResult, LevelComparison
from infertriage.report.html import (
    AbPlan,
    Band,
    LevelView,
    Look,
    MaxRateView,
    RateStep,
    RunReport,
    level_bands,
    render_report,
    run_charts,
    span_of,
)
from infertriage.report.mlperf import SUMMARY_FILE
from infertriage.schemas import (
    BenchRunInfo,
    Check,
    CompareRunInfo,
    DiagnoseRunInfo,
    Diagnosis,
    RequestRecord,
    RunDir,
    RunInfo,
    Sample,
    Signal,
    Thresholds,
    UserError,
    ValidateRunInfo,
    Validity,
    load_thresholds,
    read_json,
)

__all__ = ["ReportResult", "ReportSpec", "build_report", "check_html_path", "write_report"]

_ARMS = ("A", "B")


@dataclass(frozen=True, slots=True)
class ReportResult:
    run_dir: Path
    html: Path
    command: str
    sections: tuple[str, ...]
    num_bytes: int

    def to_json(self) -> dict[str, object]:
        return {
            "schema": "infertriage.report/v1",
            "run_dir": str(self.run_dir),
            "html": str(self.html),
            "command": self.command,
            "sections": list(self.sections),
            "bytes": self.num_bytes,
        }


def _thresholds(info: RunInfo) -> tuple[Thresholds, list[str]]:
    """The SLOs the run was judged against: its spec's, else the defaults (with a note)."""
    spec = run_spec(info)
    if isinstance(spec, BenchSpec):
        return spec.thresholds or Thresholds(), []
    slo = getattr(spec, "slo", None)
    if slo is None:
        return Thresholds(), []
    try:
        return load_thresholds(slo), []
    except UserError as err:
        return Thresholds(), [f"the run's --slo no longer loads ({err}); default SLOs shown."]


def _stored_validity(info: RunInfo) -> dict[str, Validity]:
    """bench's own validity of each level (with its client's health and the lengths asked)."""
    if not isinstance(info, BenchRunInfo):
        return {}
    out = {}
    for level in info.summary.levels:
        with contextlib.suppress(ValidationError):
            if isinstance(name := level.get("name"), str) and level.get("validity"):
                out[name] = Validity.model_validate(level["validity"])
    return out


def _float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _pair(value: object) -> tuple[float, float] | None:
    if isinstance(value, list) and len(value) == 2:
        low, high = _float(value[0]), _float(value[1])
        if low is not None and high is not None:
            return low, high
    return None


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def _stored_levels(info: RunInfo) -> dict[str, dict[str, object]]:
    """bench's levels as run.json keeps them, by name."""
    if not isinstance(info, BenchRunInfo):
        return {}
    return {n: dict(lv) for lv in info.summary.levels if isinstance(n := lv.get("name"), str)}


def _saturation(stored: Mapping[str, object] | None) -> str | None:
    """An over-saturated level's evidence line (run.json's level `saturation`)."""
    verdict = (stored or {}).get("saturation")
    if not isinstance(verdict, dict):
        return None
    line = verdict.get("describe")
    return line if isinstance(line, str) else "over-saturated (no evidence kept)"


def _mlperf_blocks(run: RunDir) -> dict[str, str]:
    """mlperf_log_summary.txt's block per level ("# level NAME" heads each); a file without
    heads (one level's block) under ""."""
    path = run.root / SUMMARY_FILE
    if not path.is_file():
        return {}
    text = path.read_text(encoding="utf-8", errors="replace")
    if not text.startswith("# level "):
        return {"": text}
    blocks: dict[str, str] = {}
    for part in text[len("# level ") :].split("\n# level "):
        name, _, block = part.partition("\n")
        blocks[name] = block
    return blocks


def _mlperf(stored: Mapping[str, object] | None, block: str | None) -> str | None:
    """The level's LoadGen block: the file's, else a short one from run.json's `mlperf`."""
    if block is not None:
        return block
    verdict = (stored or {}).get("mlperf")
    if not isinstance(verdict, dict):
        return None
    lines = [
        "MLPerf Results Summary (from run.json; mlperf_log_summary.txt is missing)",
        f"Result is : {verdict.get('result')}",
    ]
    for key in (
        "performance_constraints_met",
        "min_duration_met",
        "min_queries_met",
        "early_stopping_met",
    ):
        lines.append(f"  {key}: {verdict.get(key)}")
    recommendations = verdict.get("recommendations")
    if isinstance(recommendations, list):
        lines += ["Recommendations:", *(f" * {line}" for line in recommendations)]
    early = verdict.get("early_stopping")
    for name, stop in early.items() if isinstance(early, dict) else ():
        if isinstance(stop, dict):
            lines += [f"{name.upper()} Early Stopping Result:", str(stop.get("text"))]
    return "\n".join(lines) + "\n"


def _max_rate(info: RunInfo) -> MaxRateView | None:
    """`bench --find-max-rate`'s search, as run.json's summary `max_rate` keeps it."""
    found = info.summary.max_rate if isinstance(info, BenchRunInfo) else None
    if not isinstance(found, dict):
        return None
    steps = []
    for step in _list(found.get("steps")):
        if not isinstance(step, dict):
            continue
        rate, attainment = _float(step.get("rate")), _float(step.get("attainment"))
        interval = _pair(step.get("attainment_interval"))
        if rate is None or attainment is None or interval is None:
            continue
        holds = step.get("holds")
        steps.append(
            RateStep(
                rate=rate,
                num_judged=int(_float(step.get("num_judged")) or 0),
                attainment=attainment,
                interval=interval,
                holds=holds if isinstance(holds, bool) else None,
                valid=step.get("valid") is not False,
                why=str(step.get("why") or ""),
            )
        )
    slos = found.get("slos")
    bracket = found.get("bracket")
    low, high = bracket if isinstance(bracket, list) and len(bracket) == 2 else (None, None)
    return MaxRateView(
        rule=str(found.get("rule") or "attainment"),
        target=_float(found.get("target")) or 0.0,
        slos=tuple((str(k), v) for k, raw in (slos or {}).items() if (v := _float(raw)) is not None)
        if isinstance(slos, dict)
        else (),
        max_rate=_float(found.get("max_rate")),
        attainment=_float(found.get("attainment")),
        interval=_pair(found.get("attainment_interval")),
        bracket=(_float(low), _float(high)),
        converged=found.get("converged") is True,
        why=str(found.get("why") or ""),
        steps=tuple(steps),
        probe_rps=_float(found.get("probe_throughput")),
    )


def _ab_plan(run: RunDir) -> AbPlan | None:
    """compare.json's sample plan, looks, notes and verdict (None without the file)."""
    path = run.root / "compare.json"
    if not path.is_file():
        return None
    try:
        document = read_json(path)
    except (UserError, ValueError):
        return None
    if not isinstance(document, dict):
        return None
    levels = document.get("levels")
    first = levels[0] if isinstance(levels, list) and levels else {}
    plan = first.get("plan") if isinstance(first, dict) else None
    line: str | None = None
    needs: tuple[tuple[str, int], ...] = ()
    if isinstance(plan, dict) and (per_arm := _float(plan.get("requests_per_arm"))):
        threshold, power = _float(plan.get("threshold")), _float(plan.get("power"))
        pilot = _float(plan.get("pilot_per_arm"))
        metrics = [m for m in _list(plan.get("metrics")) if isinstance(m, dict)]
        needs = tuple(
            (str(m.get("metric")), int(v)) for m in metrics if (v := _float(m.get("needed")))
        )
        errors = _float(plan.get("error_rate_requests"))
        line = (
            f"Sample plan: ~{per_arm:.0f} requests per arm to detect a {threshold or 0:.0%} "
            f"change at {power or 0:.0%} power, from {pilot or 0:.0f} pilot requests per arm"
            + (f"; a rise of the error rate needs {errors:.0f}" if errors else "")
            + "."
        )
    looks = tuple(
        Look(
            index=int(_float(look.get("look")) or 0),
            block=int(_float(look.get("block")) or 0),
            per_arm=int(_float(look.get("per_arm")) or 0),
            alpha=_float(look.get("alpha")) or 0.0,
            undecided=tuple(str(u) for u in _list(look.get("undecided"))),
        )
        for look in _list(document.get("looks"))
        if isinstance(look, dict)
    )
    notes = tuple(str(n) for n in _list(document.get("notes")))
    verdict = document.get("verdict")
    return AbPlan(line, needs, looks, notes, verdict if isinstance(verdict, str) else None)


def _level(
    name: str,
    records: Sequence[RequestRecord],
    thresholds: Thresholds,
    stored: Mapping[str, Validity] | None = None,
) -> LevelView:
    """A level's view; its validity bench's, else judged on its records (a level bench named)."""
    summary = summarize(records, default_slos(thresholds))
    validity = (stored or {}).get(name)
    mode, value = nominal_of(name)
    if validity is None and mode is not None:
        validity = judge_validity(records, thresholds, LevelFacts(mode=mode, value=value))
    ok = [r for r in records if r.ok]
    ttft = np.asarray([r.ttft_s for r in ok if r.ttft_s is not None], dtype=np.float64)
    itl = [itl_samples(r) for r in ok]
    return LevelView(
        name=name,
        summary=summary,
        slo=level_slos(summary, thresholds),
        ttft_s=ttft,
        itl_s=np.concatenate(itl) if itl else np.zeros(0),
        validity=validity,
    )


def _groups(records: Sequence[RequestRecord], key: str | None) -> dict[str, list[RequestRecord]]:
    groups: dict[str, list[RequestRecord]] = {}
    for record in records:
        name = record.labels.get(key, "") if key else group_key(record)
        groups.setdefault(name, []).append(record)
    return groups


def _diagnosis(run: RunDir) -> Diagnosis | None:
    if not run.diagnosis.is_file():
        return None
    try:
        return Diagnosis.model_validate(read_json(run.diagnosis))
    except ValidationError as err:
        raise UserError(f"{run.diagnosis}: not a diagnosis ({err.errors()[0]['msg']}).") from err


def _checks(info: RunInfo) -> tuple[Check, ...]:
    """validate's checklist, as run.json keeps it."""
    return tuple(info.summary.checks) if isinstance(info, ValidateRunInfo) else ()


def _comparison(info: RunInfo, records: Sequence[RequestRecord]) -> CompareResult | None:
    """An A/B run's comparison, recomputed from its records with its threshold and seed."""
    if info.command != "compare":
        return None
    arms = [[r for r in records if r.labels.get("arm") == arm] for arm in _ARMS]
    if not all(any(r.ok for r in arm) for arm in arms):
        return None
    try:
        spec = CompareABSpec.model_validate(info.spec)
        urls, threshold, seed = spec.urls, spec.threshold, spec.seed
    except ValidationError:
        urls, threshold, seed = ("?", "?"), 0.10, 0
    comparison = compare_records(arms[0], arms[1], threshold=threshold, seed=seed)
    return CompareResult(
        base=f"A {urls[0]}",
        run=f"B {urls[1]}",
        levels=(LevelComparison("A", "B", comparison),),
        environment=(),
        server_config=(),
        notes=(),
    )


def _asked(info: RunInfo) -> BenchSpec | DiagnoseSpec | ValidateSpec | CompareABSpec | None:
    """The spec the run was made with (an A/B run's: None when it no longer reads)."""
    if not isinstance(info, CompareRunInfo):
        return run_spec(info)
    try:
        return CompareABSpec.model_validate(info.spec)
    except ValidationError:
        return None


def _workload(info: RunInfo) -> str | None:
    if isinstance(info, DiagnoseRunInfo | ValidateRunInfo):
        return info.config.workload
    spec = run_spec(info) if isinstance(info, BenchRunInfo) else None
    return spec.workload.text if isinstance(spec, BenchSpec) else None


def _facts(info: RunInfo) -> tuple[tuple[str, str], ...]:
    server, env = info.server_config, info.environment
    spec = _asked(info)
    asked = spec.client.model if spec is not None else None
    levels = info.config.levels if isinstance(info, DiagnoseRunInfo) else []
    pairs: list[tuple[str, object]] = [
        ("engine", server.engine),
        ("engine version", server.version),
        ("model", server.model),
        ("model asked for", asked if asked != server.model else None),
        ("max_model_len", server.max_model_len),
        ("KV-cache blocks", server.num_gpu_blocks),
        ("gpu_memory_utilization", server.gpu_memory_utilization),
        ("workload", _workload(info)),
        ("levels", ", ".join(levels) or None),
        ("GPUs", ", ".join(gpu.name for gpu in env.gpus) or None),
        ("host", f"{env.platform}, {env.cpu_count} CPUs" if env.platform else None),
        ("infertriage", env.infertriage),
    ]
    return tuple((key, str(value)) for key, value in pairs if value not in (None, ""))


def _notes(info: RunInfo, summary: RunSummary) -> list[str]:
    notes = list(info.config.notes) if isinstance(info, DiagnoseRunInfo) else []
    notes += info.summary.warnings if isinstance(info, BenchRunInfo) else []
    if summary.status == "interrupted":
        notes.insert(0, "the run was interrupted (Ctrl-C): it shows only what it measured.")
    elif summary.status == "running":
        notes.insert(0, "the run stopped before it finished (killed?): it shows what it kept.")
    if summary.client_bound:
        notes.append("the load client fell behind in this run: its latencies are not trusted.")
    return notes


def _target(info: RunInfo, root: Path) -> str:
    if isinstance(info, CompareRunInfo):
        urls = info.config.urls
        return " vs ".join(f"{arm} {url}" for arm, url in zip(_ARMS, urls, strict=False))
    return run_target(info, str(root))


def _bands(records: Sequence[RequestRecord], *, ab: bool) -> tuple[Band, ...]:
    """The load levels (validate: its phases); an A/B run's interleaved blocks."""
    if not ab:
        return level_bands(_groups(records, None))
    blocks = _groups(records, "block")
    return level_bands({f"block {name}": group for name, group in blocks.items()})


def build_report(run: RunDir) -> RunReport:
    """What the page of `run` shows; see the module docstring."""
    info = run.read_info()
    summary = RunSummary.of(run, info)
    thresholds, notes = _thresholds(info)
    records = list(run.iter_records(run.requests, RequestRecord))
    samples = list(run.iter_records(run.metrics, Sample))
    signals = list(run.iter_records(run.signals, Signal))
    ab = info.command == "compare"
    groups = _groups(records, "arm" if ab else None)
    stored, kept, blocks = _stored_validity(info), _stored_levels(info), _mlperf_blocks(run)
    main_name = summary.main_level or (list(groups)[-1] if groups and not ab else None)
    if len(blocks) == 1 and main_name is not None and not blocks.keys() & groups.keys():
        blocks = {main_name: next(iter(blocks.values()))}  # validate's: its measured level
    levels = tuple(
        replace(
            _level(name, group, thresholds, stored),
            saturation=_saturation(kept.get(name)),
            mlperf=_mlperf(kept.get(name), blocks.get(name)),
        )
        for name, group in groups.items()
        if group
    )
    diagnosis = _diagnosis(run)
    hints = []
    if diagnosis is None and not ab:
        hints.append(
            f"No seven-layer map yet: `infertriage diagnose --from-run {run.root}` draws it, "
            f"then `infertriage report {run.root}` shows it here."
        )
    if not samples:
        hints.append("No server metrics in this run: diagnose and validate scrape them.")
    main = summary.main_level or (levels[-1].name if levels and not ab else None)
    return RunReport(
        command=info.command,
        target=_target(info, run.root),
        run_dir=run.root,
        created_unix_s=info.created_unix_s,
        status=summary.status or "complete",
        facts=_facts(info),
        notes=tuple(_notes(info, summary) + notes),
        diagnosis=diagnosis,
        levels=levels,
        main_level=main,
        span=span_of(records, samples),
        bands=_bands(records, ab=ab),
        charts=run_charts(records, samples),
        trace=tuple(s for s in signals if s.name.startswith("trace.")),
        checks=_checks(info),
        comparison=_comparison(info, records),
        ab_plan=_ab_plan(run) if ab else None,
        max_rate=_max_rate(info),
        hints=tuple(hints),
    )


def check_html_path(path: Path) -> Path:
    """`--html F`: a file whose folder exists (checked before any work); a link is written
    through, to the file it names (made where it does not exist yet).

    The page replaces F whole (a new file renamed over it), so F must not be a device or a
    FIFO: run as root, `--html /dev/null` replaced /dev/null with the page."""
    if path.is_dir():
        raise UserError(f"--html {path} is a folder, not a file.")
    if path.is_symlink():
        try:
            path = path.resolve(strict=False)
        except RuntimeError as err:  # a loop of links (before Python 3.13)
            raise UserError(f"--html {path} is a link to itself.") from err
    if path.exists() and not path.is_file():
        raise UserError(f"--html {path} is not a regular file (a device or a FIFO).")
    if not path.parent.is_dir():
        raise UserError(f"--html {path}: the folder {path.parent} does not exist.")
    return path


def write_report(spec: ReportSpec) -> ReportResult:
    """`report RUN [--html F]`: the page of the run, written to F (default RUN/report.html)."""
    run = RunDir.open(spec.run)
    path = check_html_path(spec.html or run.report_html)
    report = build_report(run)
    page = render_report(report)
    data = page.html.encode("utf-8")
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    partial.replace(path)  # a reader never sees half a page
    return ReportResult(run.root, spec.html or path, report.command, page.sections, len(data))
