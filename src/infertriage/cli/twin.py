"""cli, level 6: `infertriage twin` — serve the simulated vLLM-like server."""

from __future__ import annotations

from pathlib import Path

import typer

from infertriage import api
from infertriage.api.specs import TwinSpec
from infertriage.cli.options import non_negative, positive, scenario_name, seconds, tcp_port


def twin(
    scenario: str = typer.Option(
        "healthy", "--scenario", callback=scenario_name, help="Packaged name or YAML path."
    ),
    port: int = typer.Option(
        8000, "--port", callback=tcp_port, help="Port on 127.0.0.1 (0 picks a free one)."
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind."),
    load_time: float | None = typer.Option(
        None,
        "--load-time",
        parser=seconds,
        callback=non_negative,
        help="How long /health answers 503: 0, 5s (default: the scenario's).",
    ),
    profile_dir: Path | None = typer.Option(
        None, "--profile-dir", help="Serve /start_profile and /stop_profile; traces go here."
    ),
    parent_pid: int | None = typer.Option(
        None,
        "--parent-pid",
        hidden=True,
        callback=positive,
        help="Stop when this process, the parent, ends.",
    ),
) -> None:
    spec = TwinSpec(
        scenario=scenario,
        host=host,
        port=port,
        load_time_s=load_time,
        profile_dir=profile_dir,
        parent_pid=parent_pid,
    )
    api.serve_twin(spec)
