"""cli, level 6: `infertriage trace` — parse, call `api.analyze_trace`, render."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from infertriage.api.trace import analyze_trace
from infertriage.cli import flags
from infertriage.cli.common import print_json
from infertriage.report.trace import render_trace, trace_to_json
from infertriage.schemas.text import show_controls


def trace(
    files: list[Path] = typer.Argument(
        ...,
        help="PyTorch-profiler traces (.json, .json.gz), a directory of ranks, or nsys .sqlite.",
    ),
    log: Path | None = typer.Option(
        None,
        "--log",
        metavar="PATH",
        help="A TORCH_LOGS=recompiles log to count recompilations from.",
    ),
    hta_convention: bool = typer.Option(
        False,
        "--hta-convention",
        help="Figures as HTA computes them: each rank's last ProfilerStep left out.",
    ),
    json_out: bool = flags.json_out(),
) -> None:
    report = analyze_trace(files, log=log, hta_convention=hta_convention)
    for note in report.notes:
        typer.echo(f"note: {show_controls(note)}", err=True)
    if json_out:
        print_json(trace_to_json(report))
    else:
        render_trace(report, Console())
