"""report, level 4: a fleet's replicas side by side (`metrics --prometheus`), on screen and as JSON.

Takes a `FleetView`; gives `render_fleet` (one table, a row per figure, a
column per replica, the busiest-over-mean ratio, flagged rows in red — in
yellow, "uneven, within chance", where the replicas' requests in flight and
request counts say a few arrivals' chance, as `application.replica_imbalance`
judges it) and
`fleet_to_json` (schema `infertriage.fleet/v1`, SI units). Instance names,
the selector and notes come from Prometheus: shown as data (`schemas.text`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from infertriage.analyze.signals.deployment import fleet_signals
from infertriage.collect import FleetView
from infertriage.diagnose.rules.application import beyond_chance
from infertriage.report.metrics import format_value
from infertriage.schemas import Thresholds
from infertriage.schemas.text import terminal_text

__all__ = ["FLEET_SCHEMA", "fleet_to_json", "render_fleet"]

FLEET_SCHEMA = "infertriage.fleet/v1"


def fleet_to_json(view: FleetView) -> dict[str, Any]:
    return {"schema": FLEET_SCHEMA, **dataclasses.asdict(view)}


def _chance(view: FleetView) -> tuple[bool, str]:
    """Whether the replicas' uneven load is beyond chance (`beyond_chance`), and what an
    uneven row's line says after its ratio."""
    found = {s.name: s.value for s in fleet_signals(fleet_to_json(view))}
    partial = found.get("fleet.replicas_partial")
    if partial:
        return False, (
            f"{partial:.0f} replicas came or went within the window, so the replicas are "
            "compared over different spans."
        )
    excess, chance = found.get("fleet.busiest_excess"), found.get("fleet.routing_chance")
    real, why = beyond_chance(excess, chance, found.get("fleet.request_imbalance"), Thresholds())
    if real:
        return True, f" ({why}); check the load balancer's policy."
    return False, f", within a few arrivals' chance ({why})."


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
    real, why = _chance(view)
    for figure in view.figures:
        by_instance = {i.instance: i.mean for i in figure.instances}
        cells = [
            format_value(by_instance[i], figure.unit) if i in by_instance else "—"
            for i in view.instances
        ]
        ratio = f"{figure.imbalance:.2f}×" if figure.imbalance is not None else "—"
        style = ("bold red" if real else "yellow") if figure.flagged else None
        table.add_row(terminal_text(f"{figure.name} {figure.figure}"), *cells, ratio, style=style)
    console.print(table)
    label = ("imbalanced:", "red") if real else ("uneven:", "yellow")
    for figure in view.imbalanced:
        ratio = f"{figure.imbalance:.2f}× the mean"
        said = f"{figure.name} {figure.figure}: the busiest replica {ratio}"
        if not why.startswith((" ", ",")):  # a sentence of its own
            said += "; "
        console.print(Text.assemble(label, terminal_text(f" {said}{why}")))
    for note in view.notes:
        console.print(terminal_text(note, "dim"))
