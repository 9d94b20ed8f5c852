"""api, level 5: the `trace` command's entry point.

Takes trace paths (PyTorch-profiler JSON, a directory of per-rank traces,
Nsight Systems SQLite exports) and an optional `TORCH_LOGS=recompiles` log;
gives a `TraceReport` whose findings are the diagnose rules' over the
trace's signals alone (the same rules and thresholds as `diagnose`). Bad
input is a `UserError` of one sentence.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from infertriage.analyze.logs.source import LogSource
from infertriage.analyze.trace import (
    TraceReport,
    analyze_tables,
    load_traces,
    parse_recompile_log,
)
from infertriage.diagnose import Evidence, trace_findings
from infertriage.schemas import Thresholds, UserError

__all__ = ["analyze_trace"]


def analyze_trace(paths: Sequence[Path], log: Path | None = None) -> TraceReport:
    """The `trace` command: load every trace once, run every analysis, merge the ranks."""
    recompiles = None
    if log is not None:
        try:  # streamed, with the bounds of every log read (`analyze.logs.source`)
            recompiles = parse_recompile_log(LogSource(log).lines())
        except UserError as err:
            raise UserError(f"--log {err.message}") from err
    tables = load_traces(list(paths))
    report = analyze_tables(tables, recompiles, str(log) if log is not None else None)
    findings = trace_findings(Evidence.of(report.signals), Thresholds())
    return dataclasses.replace(report, findings=findings)
