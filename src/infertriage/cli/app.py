"""cli, level 6: the typer application and the console-script entry point."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

import typer

from infertriage import __version__
from infertriage.api.interrupt import Interrupt, signal_name, stop_signals
from infertriage.cli import bench as bench_cmd
from infertriage.cli import compare as compare_cmd
from infertriage.cli import diagnose as diagnose_cmd
from infertriage.cli import logs as logs_cmd
from infertriage.cli import metrics as metrics_cmd
from infertriage.cli import monitor as monitor_cmd
from infertriage.cli import plan as plan_cmd
from infertriage.cli import report as report_cmd
from infertriage.cli import simulate as simulate_cmd
from infertriage.cli import topology as topology_cmd
from infertriage.cli import trace as trace_cmd
from infertriage.cli import twin as twin_cmd
from infertriage.cli import validate as validate_cmd
from infertriage.cli.commands import APP_HELP, COMMANDS
from infertriage.cli.outfail import WRITE_ERRNOS, flush_stdout, pipe_error, write_failure
from infertriage.cli.usage import PROG, ClickException, usage_sentence
from infertriage.schemas import EXIT_INTERRUPTED, EXIT_USER_ERROR, Interrupted, UserError
from infertriage.schemas.text import show_controls

app = typer.Typer(
    name="infertriage",
    help=APP_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
_CALLBACKS: dict[str, Callable[..., Any]] = {
    "diagnose": diagnose_cmd.diagnose,
    "plan": plan_cmd.plan,
    "bench": bench_cmd.bench,
    "trace": trace_cmd.trace,
    "logs": logs_cmd.logs,
    "metrics": metrics_cmd.metrics,
    "simulate": simulate_cmd.simulate,
    "twin": twin_cmd.twin,
    "validate": validate_cmd.validate,
    "report": report_cmd.report,
    "topology": topology_cmd.topology,
    "monitor-config": monitor_cmd.monitor_config,
    "compare": compare_cmd.compare,
}
for _name, _help in COMMANDS:
    if _name == "baseline":
        app.add_typer(compare_cmd.baseline_app, name="baseline", help=_help)
    else:
        app.command(_name, help=_help)(_CALLBACKS[_name])


def _version(value: bool) -> None:
    if value:
        typer.echo(f"infertriage {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """infertriage: which of the seven layers is the bottleneck, the evidence, what to change."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script exits with it)."""
    with stop_signals() as stop:  # SIGTERM and SIGHUP take Ctrl-C's path
        code = _run(argv, stop)
    return _exit(code, argv)


def _run(argv: Sequence[str] | None, stop: Interrupt) -> int:
    try:
        args = list(argv) if argv is not None else None
        result = app(args=args, prog_name=PROG, standalone_mode=False)
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
