"""report, level 4: a fleet's replicas side by side (`metrics --prometheus`), on screen and as JSON.

Takes a `FleetView`; gives `render_fleet` (one table, a row per figure, a
column per replica, the busiest-over-mean ratio, flagged rows in red) and
`fleet_to_json` (schema `infertriage.fleet/v1`, SI units). Instance names,
the selector and notes come from Prometheus: shown as data (`schemas.text`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from infertriage.collect import FleetView
from infertriage.report.metrics import format_value
from infertriage.schemas.text import terminal_text

__all__ = ["FLEET_SCHEMA", "fleet_to_json", "render_fleet"]

FLEET_SCHEMA = "infertriage.fleet/v1"


def fleet_to_json(view: FleetView) -> dict[str, Any]:
    return {"schema": FLEET_SCHEMA, **dataclasses.asdict(view)}


def render_fleet(view: FleetView, console: Console) -> None:
    start, end = view.window
    title = (
        f"{view.engine} fleet {view.selector} at {view.prometheus_url}: "
        f"{len(view.instances)} replicas over {end - start:.0f} s"
    )
    table = Table(title=terminal_text(title), title_justify="left")
    table.add_column("figure")
    for instance in view.instances:
        table.add_column(terminal_text(instance), justify="right")
    table.add_column("busiest / mean", justify="right")
    for figure in view.figures:
        by_instance = {i.instance: i.mean for i in figure.instances}
        cells = [
            format_value(by_instance[i], figure.unit) if i in by_instance else "—"
            for i in view.instances
        ]
        ratio = f"{figure.imbalance:.2f}×" if figure.imbalance is not None else "—"
        style = "bold red" if figure.flagged else None
        table.add_row(terminal_text(f"{figure.name} {figure.figure}"), *cells, ratio, style=style)
    console.print(table)
    for figure in view.imbalanced:
        line = terminal_text(
            f" {figure.name} {figure.figure}: the busiest replica "
            f"{figure.imbalance:.2f}× the mean; check the load balancer's policy."
        )
        console.print(Text.assemble(("imbalanced:", "red"), line))
    for note in view.notes:
        console.print(terminal_text(note, "dim"))
