"""`schemas.text`: server text as data on a terminal, in Markdown and in HTML."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.table import Table

from infertriage.schemas.text import (
    escape_html,
    escape_markdown,
    escape_terminal,
    show_controls,
    terminal_text,
)

HOSTILE = [
    "[/x]",
    "[bold]loud",
    "\x1b[2J",
    "\x1b]0;pwn\x07",
    "<script>alert(1)</script>",
    "a|b",
    "`code`",
    "back\\",
    "\x9b31m",  # C1 CSI
    "\u202eevil",  # right-to-left override
    "\r overwrite",
    ":thumbs_up:",
]


def _rendered(*renderables: object) -> str:
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False, color_system=None)
    for renderable in renderables:
        console.print(renderable)
    return out.getvalue()


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J", "\\x1b[2J"),
        ("\x1b]0;t\x07", "\\x1b]0;t\\x07"),
        ("a\tb\nc", "a\tb\nc"),  # tab and newline stay
        ("\r\x00\x7f\x9b", "\\x0d\\x00\\x7f\\x9b"),
        ("\u202e\u2066\u2028", "\\u202e\\u2066\\u2028"),
        ("café 日本", "café 日本"),
    ],
)
def test_controls_are_made_visible(raw: str, shown: str) -> None:
    assert show_controls(raw) == shown


@pytest.mark.parametrize("raw", HOSTILE)
def test_terminal_shows_the_text_as_sent(raw: str) -> None:
    table = Table(title=terminal_text(raw))
    table.add_column(terminal_text(raw))
    table.add_row(terminal_text(raw), terminal_text(raw, "bold"))
    out = _rendered(terminal_text(raw), table)
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out and "\r" not in out
    assert out.count(show_controls(raw)) == 5  # not one character taken as markup


@pytest.mark.parametrize("raw", HOSTILE[:-1])
def test_a_markup_string_shows_the_text_as_sent(raw: str) -> None:
    table = Table(title=escape_terminal(raw))
    table.add_column(escape_terminal(raw))
    table.add_row(escape_terminal(raw))
    out = _rendered(escape_terminal(raw), table)
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out and "\r" not in out
    assert out.count(show_controls(raw)) == 4


def test_only_text_keeps_emoji_codes() -> None:
    # rich replaces :name: in a markup string and has no escape for it: data goes as Text
    assert ":thumbs_up:" in _rendered(terminal_text(":thumbs_up:"))


@pytest.mark.parametrize("raw", HOSTILE)
def test_markdown_keeps_tables_and_html_intact(raw: str) -> None:
    cell = escape_markdown(raw)
    for forbidden in ("\x1b", "\x07", "<", ">", "\n", "\r"):
        assert forbidden not in cell
    # every pipe and backtick is escaped, so a table row keeps its columns
    assert cell.count("|") == cell.count("\\|")
    assert cell.count("`") == cell.count("\\`")


def test_markdown_escapes() -> None:
    assert escape_markdown("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert escape_markdown("a|b`c` & d\\") == "a\\|b\\`c\\` &amp; d\\\\"
    assert escape_markdown("[x](http://e) *b* _i_ ~s~") == (
        "\\[x\\](http://e) \\*b\\* \\_i\\_ \\~s\\~"
    )
    # between letters or digits an underscore is no emphasis: names read as themselves
    assert escape_markdown("gpu_memory_utilization _x a_") == "gpu_memory_utilization \\_x a\\_"
    assert escape_markdown("one\ntwo\tthree") == "one two three"
    assert escape_markdown("\x1b[2J") == "\\\\x1b\\[2J"  # renders as \x1b[2J


def test_html_escapes() -> None:
    assert escape_html("<script>\"x\" & 'y'</script>\x1b") == (
        "&lt;script&gt;&quot;x&quot; &amp; &#x27;y&#x27;&lt;/script&gt;\\x1b"
    )
