"""cli, level 6: the commands' names and one-line helps, the one table of them.

The typer app registers each command with its line here, and `infertriage --help`
prints this table without importing the application (`top_help`), so the front door
answers at the speed of a bare interpreter. Nothing here imports beyond the standard
library.
"""

from __future__ import annotations

__all__ = ["APP_HELP", "COMMANDS", "HELP", "ROOT_FLAGS", "is_root_flag", "top_help"]

APP_HELP = "Find why an LLM inference service is slow: a seven-layer bottleneck map."
# in the order `--help` lists them
COMMANDS: tuple[tuple[str, str], ...] = (
    ("diagnose", "The whole pipeline: the seven-layer bottleneck map."),
    ("plan", "Capacity and roofline plan: KV cache, headroom, step times."),
    ("bench", "Load test an OpenAI-compatible server."),
    ("trace", "Kernel, launch and communication analysis of profiler traces."),
    ("logs", "Offline incident triage from server logs: timeline and the map."),
    ("metrics", "Detect the engine and show the normalised view of its metrics."),
    ("simulate", "A load test (workload, stages, time-out) on the twin, on a virtual clock."),
    ("twin", "Serve the twin: a simulated vLLM-like server on 127.0.0.1."),
    ("validate", "Go-live checklist: functional, performance, stability; exit 1 if not ready."),
    ("report", "One self-contained HTML file of a run: map, SLOs, charts, A/B."),
    ("topology", "Measured interconnect (nvidia-smi topo, nccl-tests) vs TP degrees."),
    (
        "monitor-config",
        "Prometheus recording and alert rules, an Alertmanager route and a Grafana dashboard.",
    ),
    ("compare", "Compare a run with a baseline, or A/B two servers, with statistics."),
    ("baseline", "Save runs as named baselines, list and delete them."),
)
HELP = dict(COMMANDS)
_OPTIONS = (
    ("--version", "Print the version and exit."),
    ("-v, --verbose", "More log lines on stderr: -v INFO, -vv DEBUG."),
    ("-q, --quiet", "Errors only on stderr."),
    ("--install-completion", "Install completion for the current shell."),
    ("--show-completion", "Show completion for the current shell, to copy it or customize it."),
    ("-h, --help", "Show this message and exit."),
)
# the root's options a command line may start with before the command's name
ROOT_FLAGS = frozenset({"-v", "--verbose", "-q", "--quiet"})


def is_root_flag(arg: str) -> bool:
    """`-v`, `-vv`, `--verbose`, `-q`, `--quiet`: an option of the root, not of a command."""
    if arg in ROOT_FLAGS:
        return True
    return len(arg) > 2 and arg.startswith("-") and set(arg[1:]) <= {"v", "q"}


def top_help(prog: str = "infertriage") -> str:
    """The top-level help: usage, what the tool does, its options and its commands."""
    width = max(len(name) for name, _ in (*COMMANDS, *_OPTIONS)) + 2
    lines = [f"Usage: {prog} [OPTIONS] COMMAND [ARGS]...", "", f"  {APP_HELP}", "", "Options:"]
    lines += [f"  {flag:<{width}}{text}" for flag, text in _OPTIONS]
    lines += ["", "Commands:"]
    lines += [f"  {name:<{width}}{text}" for name, text in COMMANDS]
    lines += ["", f"Run `{prog} COMMAND --help` for a command's options."]
    return "\n".join(lines)
