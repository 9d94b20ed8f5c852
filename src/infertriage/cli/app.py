"""cli, level 6: the typer application and the console-script entry point."""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import typer

from infertriage import __version__
from infertriage.api.interrupt import Interrupt, signal_name, stop_signals
from infertriage.cli.commands import APP_HELP, COMMANDS, is_root_flag
from infertriage.cli.examples import epilog
from infertriage.cli.helpfmt import install as install_help_format
from infertriage.cli.logging_setup import configure as configure_logging
from infertriage.cli.outfail import WRITE_ERRNOS, flush_stdout, pipe_error, write_failure
from infertriage.cli.usage import PROG, ClickException, usage_sentence
from infertriage.schemas import EXIT_INTERRUPTED, EXIT_USER_ERROR, Interrupted, UserError
from infertriage.schemas.text import show_controls

if TYPE_CHECKING:
    app: typer.Typer  # every command registered; built on first use (`__getattr__`)

# each command's module in `infertriage.cli` and its callback (`baseline` is a group)
_CALLBACKS: dict[str, tuple[str, str]] = {
    "diagnose": ("diagnose", "diagnose"),
    "plan": ("plan", "plan"),
    "bench": ("bench", "bench"),
    "trace": ("trace", "trace"),
    "logs": ("logs", "logs"),
    "metrics": ("metrics", "metrics"),
    "simulate": ("simulate", "simulate"),
    "twin": ("twin", "twin"),
    "validate": ("validate", "validate"),
    "report": ("report", "report"),
    "topology": ("topology", "topology"),
    "monitor-config": ("monitor", "monitor_config"),
    "compare": ("compare", "compare"),
    "baseline": ("compare", "baseline_app"),
}
# commands whose numpy work never reaches BLAS (element-wise, sorting, searching): in their
# console-script process OpenBLAS starts no thread pool, which costs about 0.035 CPU-s of
# numpy's import on 2 cores (more with more cores); OPENBLAS_NUM_THREADS set by the user wins
_NO_BLAS_THREADS = frozenset({"trace"})


def build_app(only: str | None = None) -> typer.Typer:
    """The typer application: every command, or only the command `only` names, so that a
    command imports its own module (and what that needs) and no other command's."""
    install_help_format()
    built = typer.Typer(
        name="infertriage",
        help=APP_HELP,
        no_args_is_help=True,
        add_completion=True,  # opt-in: --install-completion, --show-completion
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    for name, help_ in COMMANDS:
        if only is not None and name != only:
            continue
        module_name, attribute = _CALLBACKS[name]
        callback = getattr(importlib.import_module(f"infertriage.cli.{module_name}"), attribute)
        if isinstance(callback, typer.Typer):
            built.add_typer(callback, name=name, help=help_)  # its epilog is its own
        else:
            built.command(name, help=help_, epilog=epilog(name))(callback)
    built.callback()(_root)
    return built


@contextlib.contextmanager
def loading(*, freeze: bool) -> Iterator[None]:
    """The cyclic garbage collector paused while a command's modules load, then on again.

    Importing a command allocates tens of thousands of objects that all live on (classes,
    functions, tables): the collector's passes over them free nothing and cost about a
    tenth of a short command's start. With `freeze` (the console script's own process,
    not a test's calls) they are then moved out of its reach (`gc.freeze`), so its passes
    while the command runs skip them too. It is on again before the command runs, however
    the loading ends (`cli.main` pauses it before importing this module)."""
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        gc.enable()


def __getattr__(name: str) -> object:
    """`app`, the application with every command, built when first asked for."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()["app"] = built = build_app()
    return built


def _command_of(args: Sequence[str]) -> str | None:
    """The command the arguments run, when the first of them (after the root's `-v`, `-q`)
    names one; else None (an option, a mistyped name: the whole application answers, with
    its suggestions)."""
    rest = list(args)
    while rest and is_root_flag(rest[0]):
        rest.pop(0)
    return rest[0] if rest and rest[0] in _CALLBACKS else None


def _version(value: bool) -> None:
    if value:
        typer.echo(f"infertriage {__version__}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    verbose: int = typer.Option(
        0, "--verbose", "-v", count=True, help="More log lines on stderr: -v INFO, -vv DEBUG."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Errors only on stderr."),
) -> None:
    """infertriage: which of the seven layers is the bottleneck, the evidence, what to change."""
    configure_logging(verbose, quiet)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script exits with it)."""
    with stop_signals() as stop:  # SIGTERM and SIGHUP take Ctrl-C's path
        code = _run(argv, stop)
    return _exit(code, argv)


def _run(argv: Sequence[str] | None, stop: Interrupt) -> int:
    try:
        args = list(argv) if argv is not None else None
        command = _command_of(sys.argv[1:] if args is None else args)
        if argv is None and command in _NO_BLAS_THREADS and "numpy" not in sys.modules:
            os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # read when numpy loads
        with loading(freeze=argv is None):
            built = build_app(command)
        result = built(args=args, prog_name=PROG, standalone_mode=False)
        failed = flush_stdout()  # a closed pipe fails here, inside this handling, not at exit
        if failed is not None:
            return _error(failed)
    except UserError as err:
        # the sentence may quote a server (a model name) or a file: its controls are shown,
        # and a line break it holds becomes a space (one error, one line)
        return _error(str(err))
    except Interrupted as err:  # a stop signal, after the command kept what it measured
        print(f"infertriage: {_interrupted(stop)}; {err}", file=sys.stderr)
        return stop.exit_code
    except (typer.Abort, KeyboardInterrupt):  # a stop signal before anything was measured
        print(f"infertriage: {_interrupted(stop)}.", file=sys.stderr)
        return stop.exit_code
    except ClickException as err:  # the framework's usage errors: one sentence, as ours
        return _usage_error(err, argv)
    except SystemExit as exit_:  # typer's answer to a broken pipe is a silent exit 1
        broken = pipe_error(exit_.__context__)
        if broken is None:
            raise
        return _error(write_failure(broken))
    except OSError as err:  # a full disk, a closed or full standard output
        if err.errno not in WRITE_ERRNOS:
            raise
        return _error(write_failure(err))
    code = result if isinstance(result, int) else 0
    if code == EXIT_INTERRUPTED and stop.signum is not None:  # typer's exit for a Stopped
        print(f"infertriage: {_interrupted(stop)}.", file=sys.stderr)
        return stop.exit_code
    return code


def _interrupted(stop: Interrupt) -> str:
    signum = stop.signum
    if signum is None or signum == signal.SIGINT:
        return "interrupted"
    return f"interrupted by {signal_name(signum)}"


def _error(sentence: str) -> int:
    sentence = " ".join(sentence.splitlines())
    with contextlib.suppress(OSError, ValueError):
        print(f"infertriage: error: {show_controls(sentence)}", file=sys.stderr)
    return EXIT_USER_ERROR


def _usage_error(err: Exception, argv: Sequence[str] | None) -> int:
    sentence = usage_sentence(err, sys.argv[1:] if argv is None else argv)
    show = getattr(err, "show", None)
    if sentence is None and callable(show):
        show()  # a bare group (`infertriage baseline`): its help
    elif sentence is not None:
        print(f"infertriage: error: {show_controls(sentence)}", file=sys.stderr)
    return int(getattr(err, "exit_code", EXIT_USER_ERROR))


def _exit(code: int, argv: Sequence[str] | None) -> int:
    # Called as the console script (argv None): exit the process; called from tests: return.
    if argv is None:
        sys.exit(code)
    return code
