"""schemas, level 0: server text as data — the one escaping path to a terminal, Markdown and HTML.

Anything a server or a file supplies (model names, error messages, kernel
names, label values, scenario descriptions, file names) is data: it must
never become rich markup, terminal control or Markdown/HTML structure. Every
renderer passes such text through one of these before it is shown:

- `show_controls(text)`: C0 and C1 control characters (newline and tab
  excepted), DEL and the Unicode bidirectional and line-separator controls
  are made visible as Python escapes (`ESC` → `\\x1b`), so an escape sequence
  from a server cannot clear the screen or set the window title. For plain
  `print`/`typer.echo` output.
- `terminal_text(text, style)`: `show_controls` as a rich `Text`, which rich
  never parses as markup; the form every renderer gives data in (a line, a
  table cell, a column header, a title).
- `escape_terminal(text)`: `show_controls`, then rich's markup escape: only
  where rich insists on a markup string (a progress column's format). rich
  still replaces `:emoji:` codes there, which it offers no escape for.
- `escape_markdown(text)`: controls visible, line breaks as spaces, and
  Markdown's and HTML's active characters (`\\ ` `` ` `` `* [ ] | ~ < > &`,
  and `_` but between two letters or digits) escaped, so a table row, a
  blockquote or an HTML page embedding it stays intact and `<script>` is
  text.
- `escape_html(text)`: controls visible, then `html.escape` (quotes too).
"""

from __future__ import annotations

import html
import re

from rich.markup import escape as _rich_escape
from rich.text import Text

__all__ = [
    "escape_html",
    "escape_markdown",
    "escape_terminal",
    "show_controls",
    "terminal_text",
]

# C0 but tab and newline; DEL; C1; the bidirectional overrides and isolates, which reorder
# what a reader sees ("Trojan source"); the Unicode line and paragraph separators.
_CONTROLS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]"
)
# An underscore between two letters or digits never starts or ends emphasis: left as it is,
# so `gpu_memory_utilization` reads as itself in the raw Markdown too.
_MARKDOWN_ACTIVE = re.compile(r"[\\`*\[\]|~]|_(?![^\W_])|(?<![^\W_])_")
_LINE_BREAKS = re.compile(r"[\t\n]+")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def show_controls(text: str) -> str:
    """`text` with every control character but newline and tab shown as its escape."""
    return _CONTROLS.sub(_visible, text)


def escape_terminal(text: str) -> str:
    """`text` for a string rich parses as markup: controls visible, markup escaped."""
    return _rich_escape(show_controls(text))


def terminal_text(text: str, style: str = "") -> Text:
    """`text` as a rich `Text` (never parsed as markup) with its controls visible."""
    return Text(show_controls(text), style=style)


def escape_markdown(text: str) -> str:
    """`text` for Markdown inline content (a table cell, a list item, a blockquote)."""
    flat = _LINE_BREAKS.sub(" ", show_controls(text))
    flat = html.escape(flat, quote=False)
    return _MARKDOWN_ACTIVE.sub(lambda m: "\\" + m.group(), flat)


def escape_html(text: str) -> str:
    """`text` for HTML text or an attribute value: controls visible, then `html.escape`."""
    return html.escape(show_controls(text), quote=True)
