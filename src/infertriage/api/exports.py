"""api, level 5: `--export`: a bench or diagnose run directory in vLLM's and AIPerf's formats.

Takes a run directory and the `ExportFormat`s asked for; reads run.json (through
its command's spec, `api.runview.run_spec`) and requests.jsonl, cuts the records
into their load levels (the `level` label every record carries, in the order the
levels were sent), learns each level's load (bench's summary names its mode and
value; diagnose's level names say it: `concurrency=8`, `rate=3.2`) and writes
them with `report.exports.write_exports`; gives the paths written. `bench` and
`diagnose` call it after the run when their spec asks (`exports`), so a Ctrl-C'd
run exports what it measured.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from infertriage import __version__
from infertriage.analyze.stats.latency import Slo, parse_slos
from infertriage.api.runspans import run_request_spans
from infertriage.api.runview import run_spec
from infertriage.api.specs import BenchSpec, DiagnoseSpec
from infertriage.report.exports import ExportLevel, write_exports
from infertriage.schemas import (
    BenchRunInfo,
    BenchSummary,
    DiagnoseRunInfo,
    RequestRecord,
    RunDir,
    RunInfo,
    UserError,
)
from infertriage.schemas.exports import ExportFormat
from infertriage.workload.arrivals import ArrivalKind, parse_arrivals

__all__ = ["export_levels", "export_run"]

_LOAD = re.compile(r"^(?:probe )?(rate|concurrency)=(\S+)$")
_Load = tuple[str, float | None]  # a level's mode and value


def _load_of(
    name: str, summary_levels: dict[str, tuple[str, float | None]]
) -> tuple[str, float | None]:
    """A level's mode and value: bench's summary says them, else its name does."""
    if name in summary_levels:
        return summary_levels[name]
    match = _LOAD.match(name)
    if match is None:
        return "replay", None
    try:
        return match.group(1), float(match.group(2))
    except ValueError:
        return match.group(1), None


def _summary_levels(info: RunInfo) -> dict[str, _Load]:
    out: dict[str, _Load] = {}
    if isinstance(info, BenchRunInfo) and isinstance(info.summary, BenchSummary):
        for level in info.summary.levels:
            name, mode, value = level.get("name"), level.get("mode"), level.get("value")
            if isinstance(name, str) and isinstance(mode, str):
                out[name] = (mode, float(value) if isinstance(value, int | float) else None)
    return out


def _burstiness(arrival: str) -> float | None:
    """vLLM's `--burstiness` of our `--arrival`: the gamma shape, 1 for Poisson; None for
    arrivals it has no word for (constant, ramp)."""
    arrivals = parse_arrivals(arrival, 1.0)
    if arrivals.kind is ArrivalKind.POISSON:
        return 1.0
    if arrivals.kind is ArrivalKind.GAMMA:
        return arrivals.burstiness
    return None


def _model(info: RunInfo, spec: BenchSpec | DiagnoseSpec) -> str:
    if isinstance(info.summary, BenchSummary) and info.summary.model:
        return info.summary.model
    config = info.server_config
    deployed = info.config.deployment.model if isinstance(info, DiagnoseRunInfo) else None
    served = config.model or (config.models[0] if config.models else None)
    return spec.client.model or served or deployed or ""


def _grouped(records: Sequence[RequestRecord]) -> dict[str, list[RequestRecord]]:
    """The records by level, levels in the order their first request was sent."""
    groups: dict[str, list[RequestRecord]] = {}
    for record in sorted(records, key=lambda r: r.sent_ts):
        groups.setdefault(record.labels.get("level", ""), []).append(record)
    return groups


def export_levels(root: Path) -> list[ExportLevel]:
    """The load levels of the bench or diagnose run in `root`, ready to export."""
    run = RunDir.open(root)
    info = run.read_info()
    if not isinstance(info, BenchRunInfo | DiagnoseRunInfo):
        raise UserError(f"--export: {root} is a {info.command} run; bench and diagnose export.")
    spec = run_spec(info)
    if not isinstance(spec, BenchSpec | DiagnoseSpec):
        raise UserError(f"--export: run.json in {root} stores no spec to read the load from.")
    slos: tuple[Slo, ...] = ()
    burstiness: float | None = 1.0  # diagnose's rate level is Poisson
    max_concurrency = None
    if isinstance(spec, BenchSpec):
        slos = parse_slos(spec.goodput) if spec.goodput else ()
        burstiness, max_concurrency = _burstiness(spec.arrival), spec.max_concurrency
    tokenizer = str(spec.client.tokenizer) if spec.client.tokenizer is not None else None
    summary_levels = _summary_levels(info)
    server = run_request_spans(run)  # the timeline's server phases, where spans were kept
    levels = []
    for name, records in _grouped(list(run.iter_records(run.requests, RequestRecord))).items():
        mode, value = _load_of(name, summary_levels)
        levels.append(
            ExportLevel(
                name=name or "level",
                mode=mode,
                value=value,
                records=ExportLevel.sort(records),
                model=_model(info, spec),
                endpoint=spec.client.endpoint.value,
                wall_anchor_s=info.wall_anchor_s,
                generator=f"infertriage {__version__}",
                tokenizer=tokenizer,
                max_concurrency=max_concurrency if mode == "rate" else None,
                burstiness=burstiness,
                slos=slos,
                interrupted=info.summary.status == "interrupted",
                server=server,
            )
        )
    return levels


def export_run(root: Path, formats: Sequence[ExportFormat]) -> tuple[Path, ...]:
    """Write the run in `root` in each of `formats` under `root/exports/`; the files."""
    if not formats:
        return ()
    return write_exports(root, export_levels(root), formats)
