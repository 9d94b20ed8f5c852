"""cli, level 6: `infertriage report RUN [--html F]` — parse, call `api.report`, say where."""

from __future__ import annotations

from pathlib import Path

import typer

from infertriage.api.report import write_report
from infertriage.api.specs import ReportSpec
from infertriage.cli import flags
from infertriage.cli.common import print_json
from infertriage.schemas.text import show_controls


def report(
    run: Path = typer.Argument(..., help="A run directory (diagnose, bench, validate, compare)."),
    html: Path | None = flags.html(),
    json_out: bool = flags.json_out(),
) -> None:
    result = write_report(ReportSpec(run=run, html=html))
    if json_out:
        print_json(result.to_json())
        return
    sections = ", ".join(result.sections) or "no section: the run holds nothing to show"
    typer.echo(
        f"Wrote {show_controls(str(result.html))} ({result.num_bytes / 1024:,.0f} KiB; "
        f"{show_controls(sections)}): one file, no network; open it in any browser."
    )
