"""cli, level 6: the typer application and the console-script entry point."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import typer
from typer._click.exceptions import ClickException

from infertriage import __version__
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
from infertriage.cli.usage import PROG, usage_sentence
from infertriage.schemas import EXIT_INTERRUPTED, EXIT_USER_ERROR, Interrupted, UserError
from infertriage.schemas.text import show_controls

app = typer.Typer(
    name="infertriage",
    help="Find why an LLM inference service is slow: a seven-layer bottleneck map.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("diagnose", help="The whole pipeline: the seven-layer bottleneck map.")(
    diagnose_cmd.diagnose
)
app.command("plan", help="Capacity and roofline plan: KV cache, headroom, step times.")(
    plan_cmd.plan
)
app.command("bench", help="Load test an OpenAI-compatible server.")(bench_cmd.bench)
app.command("trace", help="Kernel, launch and communication analysis of profiler traces.")(
    trace_cmd.trace
)
app.command("logs", help="Offline incident triage from server logs: timeline and the map.")(
    logs_cmd.logs
)
app.command("metrics", help="Detect the engine and show the normalised view of its metrics.")(
    metrics_cmd.metrics
)
app.command("simulate", help="The twin's engine on a virtual clock: latency, KV, throughput.")(
    simulate_cmd.simulate
)
app.command("twin", help="Serve the twin: a simulated vLLM-like server on 127.0.0.1.")(
    twin_cmd.twin
)
app.command(
    "validate", help="Go-live checklist: functional, performance, stability; exit 1 if not ready."
)(validate_cmd.validate)
app.command("report", help="One self-contained HTML file of a run: map, SLOs, charts, A/B.")(
    report_cmd.report
)
app.command("topology", help="Measured interconnect (nvidia-smi topo, nccl-tests) vs TP degrees.")(
    topology_cmd.topology
)
app.add_typer(compare_cmd.baseline_app, name="baseline")
app.command(
    "monitor-config",
    help="Prometheus recording and alert rules, an Alertmanager route and a Grafana dashboard.",
)(monitor_cmd.monitor_config)
app.command("compare", help="Compare a run with a baseline, or A/B two servers, with statistics.")(
    compare_cmd.compare
)


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
    try:
        args = list(argv) if argv is not None else None
        result = app(args=args, prog_name=PROG, standalone_mode=False)
    except UserError as err:
        # the sentence may quote a server (a model name) or a file: its controls are shown,
        # and a line break it holds becomes a space (one error, one line)
        sentence = " ".join(str(err).splitlines())
        print(f"infertriage: error: {show_controls(sentence)}", file=sys.stderr)
        return _exit(EXIT_USER_ERROR, argv)
    except Interrupted as err:  # Ctrl-C, after the command kept what it measured
        print(f"infertriage: interrupted; {err}", file=sys.stderr)
        return _exit(EXIT_INTERRUPTED, argv)
    except (typer.Abort, KeyboardInterrupt):  # Ctrl-C before anything was measured
        print("infertriage: interrupted.", file=sys.stderr)
        return _exit(EXIT_INTERRUPTED, argv)
    except ClickException as err:  # the framework's usage errors: one sentence, as ours
        return _exit(_usage_error(err, argv), argv)
    code = result if isinstance(result, int) else 0
    return _exit(code, argv)


def _usage_error(err: ClickException, argv: Sequence[str] | None) -> int:
    sentence = usage_sentence(err, sys.argv[1:] if argv is None else argv)
    if sentence is None:
        err.show()  # a bare group (`infertriage baseline`): its help
    else:
        print(f"infertriage: error: {show_controls(sentence)}", file=sys.stderr)
    return err.exit_code


def _exit(code: int, argv: Sequence[str] | None) -> int:
    # Called as the console script (argv None): exit the process; called from tests: return.
    if argv is None:
        sys.exit(code)
    return code
