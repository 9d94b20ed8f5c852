"""Trace findings are computed once: by the `trace` command; `diagnose` reads the trace's
signals alone (`api.evidence.trace_signals`) and judges them in its own single rule run."""

from __future__ import annotations

from pathlib import Path

import pytest

from infertriage.api import trace as api_trace
from infertriage.api.evidence import trace_signals
from infertriage.api.trace import analyze_trace, trace_report
from infertriage_testing.tracesynth import SynthSpec, trace_chunks


def _trace(path: Path) -> Path:
    path.write_bytes(b"".join(trace_chunks(SynthSpec(num_steps=8))))
    return path


def test_diagnose_reads_the_signals_and_runs_no_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _trace(tmp_path / "t.json")
    calls: list[int] = []
    real = api_trace.trace_findings

    def counted(*args: object) -> object:
        calls.append(1)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(api_trace, "trace_findings", counted)
    signals = trace_signals([path])
    assert signals and not calls
    report = analyze_trace([path])
    assert len(calls) == 1
    assert report.signals == trace_report([path]).signals and tuple(signals) == report.signals
