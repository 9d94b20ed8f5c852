"""cli, level 6: helpers every command shares."""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING

import orjson
import typer
from rich.console import Console

if TYPE_CHECKING:
    from infertriage.report.live import LiveView


def server_or_twin(context: typer.Context, url: str | None, *, offline: bool) -> str | None:
    """`diagnose` and `validate`: the server to measure, or None for the twin.

    `--url` and `--scenario` both given: refused (one names a server, the other the twin).
    A URL from OPENAI_BASE_URL, the shell's setting for every OpenAI client, gives way to
    what the command line asks: a `--scenario` (the twin) or a mode that reads what was
    recorded (`--from-run`, `--metrics-file`: `offline`); else it is used, and said on
    stderr, since without it the twin would have run. (Sources by name: typer keeps click's
    `ParameterSource` in a private module since 0.26.)"""
    from infertriage.schemas import UserError  # noqa: PLC0415

    if url is None:
        return url
    scenario_given = _source(context, "scenario") == "COMMANDLINE"
    if _source(context, "url") != "ENVIRONMENT":
        if scenario_given:
            raise UserError("--scenario runs the twin and --url names a server: give one of them.")
        return url
    if scenario_given or offline:
        return None
    print(
        f"infertriage: measuring the server OPENAI_BASE_URL names ({url}); unset it to run "
        "the twin.",
        file=sys.stderr,
    )
    return url


def _source(context: typer.Context, name: str) -> str | None:
    source = context.get_parameter_source(name)
    return None if source is None else source.name


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
