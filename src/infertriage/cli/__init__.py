"""cli, level 6: the thin typer app. Each command parses, calls one `api` function and renders.

`main()` is the console script: a `UserError` becomes one sentence on stderr
and exit code 2, never a traceback; so do a full disk and a closed or full
standard output (`cli.outfail`). The app is imported inside `main`, so a
Ctrl-C while the commands load is one line and exit 130 too, and `--version` and
the top-level `--help` answer without importing it (the load, twin and analysis
code): they need only the version and the table of commands (`cli.commands`).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence

__all__ = ["main"]  # the typer app is `infertriage.cli.app.app`

_EXIT_INTERRUPTED = 130  # schemas.EXIT_INTERRUPTED, not imported: nothing heavy loads first
_EXIT_USER_ERROR = 2  # schemas.EXIT_USER_ERROR


def _quick(args: Sequence[str]) -> str | None:
    """What `infertriage --version` or `infertriage --help` prints; None for anything else."""
    if list(args) == ["--version"]:
        from infertriage import __version__  # noqa: PLC0415  # see the docstring

        return f"infertriage {__version__}"
    if list(args) in (["--help"], ["-h"]):
        from infertriage.cli.commands import top_help  # noqa: PLC0415

        return top_help()
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script exits with it)."""
    if sys.stdout is None:  # started with standard output closed (`>&-`)
        sentence = "standard output is closed: give the command one (> FILE, or > /dev/null)."
        return _exit_error(sentence, argv)
    quick = _quick(sys.argv[1:] if argv is None else argv)
    if quick is not None:
        try:
            print(quick)
            sys.stdout.flush()
        except OSError as err:  # `| head -c 0`, `> /dev/full`
            from infertriage.cli.outfail import write_failure  # noqa: PLC0415

            return _exit_error(write_failure(err, stdout=True), argv)
        return 0
    gc.disable()  # while the modules load: `cli.app.loading` turns it on before the command runs
    try:
        try:
            from infertriage.cli.app import main as run  # noqa: PLC0415  # see the docstring
        except KeyboardInterrupt:
            print("infertriage: interrupted.", file=sys.stderr)
            if argv is None:
                sys.exit(_EXIT_INTERRUPTED)
            return _EXIT_INTERRUPTED
        return run(argv)
    finally:
        gc.enable()  # on already, unless the application failed before it loaded the command


def _exit_error(sentence: str, argv: Sequence[str] | None) -> int:
    print(f"infertriage: error: {sentence}", file=sys.stderr)
    if argv is None:
        sys.exit(_EXIT_USER_ERROR)
    return _EXIT_USER_ERROR
