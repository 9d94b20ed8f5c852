"""report.html, level 4: the page's building blocks — a section, a table, a status badge.

Takes text and cells that are HTML already (escaped by the caller) or plain words (a
section's title, a status: escaped here); gives the fragments every section is made of.
"""

from __future__ import annotations

from collections.abc import Sequence

from infertriage.schemas.text import escape_html as _e

__all__ = ["badge", "section", "status", "table"]


def section(anchor: str, title: str, body: str) -> str:
    """`<section id=anchor>` with its title as the heading."""
    return f'<section id="{anchor}"><h2>{_e(title)}</h2>{body}</section>'


def table(head: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "") -> str:
    """A table of cells that are HTML already (escaped by the caller)."""
    attr = f' class="{cls}"' if cls else ""
    th = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table{attr}><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def status(value: str) -> str:
    """A badge coloured by its word (pass, fail, regression, …)."""
    css = value.replace("/", "")
    return f'<span class="status s-{_e(css)}">{_e(value)}</span>'


def badge(text: str, tone: str) -> str:
    """A badge saying `text`, coloured as the status `tone` (pass, fail, inconclusive, …)."""
    return f'<span class="status s-{_e(tone)}">{_e(text)}</span>'
