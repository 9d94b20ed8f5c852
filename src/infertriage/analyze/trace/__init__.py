"""analyze.trace, level 1: kernel, launch and communication analysis of profiler traces.

Takes PyTorch-profiler Chrome traces and Nsight Systems SQLite exports; gives
a `TraceReport` of `trace.*` signals, among them those the diagnose rules
read (`derived.py`); its findings are the diagnose rules' (`api.trace`).
Parse once into a `TraceTable` (numpy columns, interned names:
`load_traces`), then every analysis is a pure function of the table
(`analyze_tables`). Synthetic traces for tests and benchmarks come from
`infertriage_testing.tracesynth`, outside the product.
"""

from __future__ import annotations

from infertriage.analyze.trace.compiled import RecompileLog, parse_recompile_log
from infertriage.analyze.trace.derived import derive_rule_signals
from infertriage.analyze.trace.load import load_traces
from infertriage.analyze.trace.mix import KernelStat, Mix
from infertriage.analyze.trace.names import ATTENTION_BACKENDS, Category, category_of
from infertriage.analyze.trace.steps import Steps, find_steps, trim_to_complete_steps
from infertriage.analyze.trace.summary import (
    RankAnalysis,
    RankSummary,
    TraceReport,
    analyze_rank,
    make_report,
    make_signals,
)
from infertriage.analyze.trace.table import TraceTable

__all__ = [
    "ATTENTION_BACKENDS",
    "Category",
    "KernelStat",
    "Mix",
    "RankAnalysis",
    "RankSummary",
    "RecompileLog",
    "Steps",
    "TraceReport",
    "TraceTable",
    "analyze_rank",
    "analyze_tables",
    "category_of",
    "derive_rule_signals",
    "find_steps",
    "load_traces",
    "parse_recompile_log",
    "trim_to_complete_steps",
]


def analyze_tables(
    tables: list[TraceTable],
    log: RecompileLog | None = None,
    log_path: str | None = None,
    *,
    hta_convention: bool = False,
) -> TraceReport:
    """Every analysis over the tables of one capture, merged across ranks (no findings yet).

    With `hta_convention` each table is first cut to HTA's window (the last
    ProfilerStep left out: `trim_to_complete_steps`), so the figures are HTA's.
    """
    if hta_convention:
        tables = [trim_to_complete_steps(t) for t in tables]
    ranks = [analyze_rank(t) for t in tables]
    signals, mix, backend = make_signals(ranks, log)
    signals += derive_rule_signals(signals)
    return make_report(
        ranks,
        signals=signals,
        mix=mix,
        backend=backend,
        log_path=log_path,
        hta_convention=hta_convention,
    )
