"""Server text as data where the end-to-end suite does not reach: a fleet, a multi-line detail."""

from __future__ import annotations

import io

from rich.console import Console

from infertriage.collect.prometheus_api import FleetFigure, FleetView, InstanceValue
from infertriage.report.fleet import render_fleet
from infertriage.report.validate import checklist_markdown, render_checklist
from infertriage.schemas import Check, CheckGroup, CheckStatus

HOSTILE = "[/x][bold]\x1b[2J\x1b]0;pwn\x07<script>|`"


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200, force_terminal=False, color_system=None), out


def test_a_fleet_with_hostile_instances_and_notes() -> None:
    values = (InstanceValue(f"pod{HOSTILE}", 2.0, 2.0, 5), InstanceValue("pod-b", 1.0, 1.0, 5))
    figure = FleetFigure(f"queue{HOSTILE}", "mean", "", "expr", values, 1.33, True)
    view = FleetView("http://p", f'job="{HOSTILE}"', "vllm", (0.0, 60.0), 5.0,
                     (f"pod{HOSTILE}", "pod-b"), (figure,), (f"note {HOSTILE}",))  # fmt: skip
    console, out = _console()
    render_fleet(view, console)
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "imbalanced:" in text and text.count("[/x][bold]\\x1b[2J") >= 4


def test_a_checklist_with_a_hostile_detail() -> None:
    check = Check(
        CheckGroup.FUNCTIONAL, "functional.chat", CheckStatus.FAIL, f"said {HOSTILE}\nand"
    )
    console, out = _console()
    render_checklist([check], console, title=f"t {HOSTILE}", notes=[HOSTILE])
    assert "\x1b" not in out.getvalue() and out.getvalue().count("<script>") == 3
    markdown = checklist_markdown([check], title=f"t {HOSTILE}", notes=[HOSTILE])
    assert "\x1b" not in markdown and "<script>" not in markdown
    row = next(line for line in markdown.splitlines() if line.startswith("| ❌"))
    assert row.endswith("\\` and |") and row.count(" | ") == 2  # one row, three cells
