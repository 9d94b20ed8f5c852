"""api, level 5: the `trace` command's entry point, and the trace analysis `diagnose` reads.

Takes trace paths (PyTorch-profiler JSON, a directory of per-rank traces,
Nsight Systems SQLite exports) and an optional `TORCH_LOGS=recompiles` log;
`trace_report` gives the `TraceReport` with its signals and no verdict (what
`diagnose` reads, and judges once with its own rules and thresholds over all its
evidence); `analyze_trace` gives the same report with its findings, the diagnose
rules' over the trace's signals alone (the same rules and thresholds as `diagnose`),
computed once. `hta_convention` leaves the last ProfilerStep out of every figure,
as HTA does, so its idle share can be reproduced (docs/commands/trace.md).
Bad input is a `UserError` of one sentence.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from infertriage.analyze.trace import (
    TraceReport,
    analyze_tables,
    load_traces,
    parse_recompile_log,
)
from infertriage.diagnose import Evidence, trace_findings
from infertriage.schemas import Thresholds, UserError

__all__ = ["analyze_trace", "trace_report"]


def trace_report(
    paths: Sequence[Path], log: Path | None = None, *, hta_convention: bool = False
) -> TraceReport:
    """Load every trace once and run every analysis, the ranks merged; no findings. The log
    (`TORCH_LOGS=recompiles`) is read once: one with no recompilation line counts none (the
    logging may have been off: no line is no zero), and a note says so."""
    recompiles = None
    notes: tuple[str, ...] = ()
    if log is not None:
        from infertriage.analyze.logs.source import LogSource  # noqa: PLC0415  # only with --log

        try:  # streamed, with the bounds of every log read (`analyze.logs.source`)
            read = parse_recompile_log(LogSource(log).lines())
        except UserError as err:
            raise UserError(f"--log {err.message}") from err
        if read.recompilations or read.limit_hits:
            recompiles = read
        else:
            notes = (
                f"--log {log} has no recompilation line (TORCH_LOGS=recompiles): "
                "no recompilation was counted from it",
            )
    tables = load_traces(list(paths))
    log_path = str(log) if log is not None else None
    report = analyze_tables(tables, recompiles, log_path, hta_convention=hta_convention)
    return dataclasses.replace(report, notes=notes)


def analyze_trace(
    paths: Sequence[Path], log: Path | None = None, *, hta_convention: bool = False
) -> TraceReport:
    """The `trace` command: `trace_report`, and the rules' findings over its signals."""
    report = trace_report(paths, log, hta_convention=hta_convention)
    findings = trace_findings(Evidence.of(report.signals), Thresholds())
    return dataclasses.replace(report, findings=findings)
