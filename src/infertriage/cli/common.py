"""cli, level 6: helpers every command shares."""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING

import orjson
from rich.console import Console

if TYPE_CHECKING:
    from infertriage.report.live import LiveView


def print_json(document: object) -> None:
    """`--json`: one JSON document on stdout and nothing else there."""
    sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
    sys.stdout.flush()


def live_view(
    *, json_out: bool, progress: bool
) -> contextlib.AbstractContextManager[LiveView | None]:
    """The live view on stderr of a long command; None with --json, --no-progress or when
    stdout or stderr is not a terminal (a pipe, a file, CI): there it would only be noise.
    A terminal, not what rich would colour: FORCE_COLOR in CI must not animate a log."""
    console = Console(stderr=True)
    terminals = sys.stdout.isatty() and sys.stderr.isatty()
    if json_out or not progress or not terminals or not console.is_interactive:
        return contextlib.nullcontext()
    from infertriage.report.live import LiveView  # noqa: PLC0415  # numpy: a live run only

    return LiveView(console)
