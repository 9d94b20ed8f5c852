"""report, level 4: the go-live checklist on screen and as Markdown.

Takes the `Check`s of one `validate` run; gives a rich table grouped
functional → performance → stability with a verdict line (READY / NOT
READY, how many failed and how many were marginal), and the same as
Markdown for a CI comment. Every name, detail, note and the title (server
text among them) go through `schemas.text`: no markup, no terminal control,
no Markdown or HTML structure of theirs.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from infertriage.schemas import Check, CheckGroup, CheckStatus, checklist_ready
from infertriage.schemas.text import escape_markdown, terminal_text

__all__ = ["checklist_markdown", "render_checklist", "verdict_line"]

_STYLE = {
    CheckStatus.PASS: "green",
    CheckStatus.MARGINAL: "yellow",
    CheckStatus.FAIL: "bold red",
    CheckStatus.WARN: "yellow",
    CheckStatus.SKIP: "dim",
}
_MARK = {
    CheckStatus.PASS: "✅",
    CheckStatus.MARGINAL: "⚠️",
    CheckStatus.FAIL: "❌",
    CheckStatus.WARN: "⚠️",
    CheckStatus.SKIP: "➖",
}


def _ordered(checks: Sequence[Check]) -> list[Check]:
    order = list(CheckGroup)
    return sorted(checks, key=lambda c: order.index(c.group))


def verdict_line(checks: Sequence[Check]) -> str:
    failed = [c for c in checks if c.status is CheckStatus.FAIL]
    marginal = [c for c in checks if c.status is CheckStatus.MARGINAL]
    skipped = [c for c in checks if c.status is CheckStatus.SKIP]
    warned = [c for c in checks if c.status is CheckStatus.WARN]
    head = "READY" if checklist_ready(checks) else "NOT READY"
    passed = len(checks) - len(failed) - len(skipped) - len(warned)
    parts = [f"{passed} of {len(checks)} checks passed"]
    if failed:
        parts.append(f"{len(failed)} failed ({', '.join(c.name for c in failed)})")
    if marginal:
        parts.append(f"{len(marginal)} marginal")
    if warned:
        parts.append(f"{len(warned)} to fix ({', '.join(c.name for c in warned)})")
    if skipped:
        parts.append(f"{len(skipped)} skipped")
    return f"{head}: " + "; ".join(parts) + "."


def render_checklist(
    checks: Sequence[Check], console: Console, *, title: str, notes: Sequence[str] = ()
) -> None:
    table = Table(title=terminal_text(title), title_justify="left", show_lines=False, expand=True)
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("detail", ratio=1)
    for check in _ordered(checks):
        status = Text(check.status.value, style=_STYLE[check.status])
        table.add_row(terminal_text(check.name), status, terminal_text(check.detail))
    console.print(table)
    for note in notes:
        console.print(terminal_text(f"note: {note}", style="dim"))
    style = "bold green" if checklist_ready(checks) else "bold red"
    console.print(terminal_text(verdict_line(checks), style=style))


def checklist_markdown(checks: Sequence[Check], *, title: str, notes: Sequence[str] = ()) -> str:
    lines = [f"### {escape_markdown(title)}", "", f"**{escape_markdown(verdict_line(checks))}**"]
    lines += ["", "| | check | detail |", "|---|---|---|"]
    for check in _ordered(checks):
        # the check's name is ours (a constant); its detail may quote the server
        detail = escape_markdown(check.detail)
        lines.append(f"| {_MARK[check.status]} | `{check.name}` | {detail} |")
    lines += [""] + [f"> note: {escape_markdown(note)}" for note in notes]
    return "\n".join(lines).rstrip() + "\n"
