"""report, level 4: what `monitor-config` shows — the files written, the alerts, the gaps.

Takes a `MonitorConfig` and the paths written; gives a terminal rendering
(rich) and one JSON document (`infertriage.monitor-config/v1`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from infertriage.report.monitoring.promql import duration
from infertriage.report.monitoring.rulefiles import alert_annotations
from infertriage.schemas.text import terminal_text

if TYPE_CHECKING:
    from infertriage.report.monitoring import MonitorConfig

__all__ = ["monitor_to_json", "render_monitor"]


def monitor_to_json(config: MonitorConfig, written: Sequence[Path]) -> dict[str, object]:
    return {
        "schema": "infertriage.monitor-config/v1",
        "engine": config.engine,
        "thresholds_from": config.limits.origin,
        "files": [str(p) for p in written],
        "recording_rules": [{"record": r.record.value, "expr": r.expr} for r in config.recordings],
        "alerts": [
            {
                "alert": a.name,
                "layer": a.layer.value,
                "expr": a.expr,
                "for_s": a.for_s,
                "threshold": a.threshold,
                "unit": a.unit,
                "next": a.next_step,
            }
            for a in config.alerts
        ],
        "left_out": [{"what": lo.what, "why": lo.reason} for lo in config.left_out],
    }


def render_monitor(config: MonitorConfig, written: Sequence[Path], console: Console) -> None:
    console.print(
        terminal_text(
            f"{config.engine}: {len(config.recordings)} recording rules, {len(config.alerts)} "
            f"alerts (thresholds: {config.limits.origin})",
            "bold",
        )
    )
    table = Table(box=None, show_header=True, header_style="bold")
    for column in ("alert", "layer", "threshold", "for"):
        table.add_column(column)
    for alert in config.alerts:
        held = duration(alert.for_s) if alert.for_s > 0 else "-"
        threshold = alert_annotations(alert)["threshold"]
        table.add_row(alert.name, alert.layer.value, terminal_text(threshold), held)
    console.print(table)
    for lo in config.left_out:
        console.print(terminal_text(f"left out: {lo.what}: {lo.reason}", "dim"))
    for path in written:
        console.print(terminal_text(f"wrote {path}"))
