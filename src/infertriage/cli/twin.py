"""cli, level 6: `infertriage twin` — serve the simulated vLLM-like server."""

from __future__ import annotations

from pathlib import Path

import typer

from infertriage import api
from infertriage.api.specs import TwinSpec
from infertriage.cli import flags
from infertriage.cli.options import seconds


def twin(
    scenario: str = flags.scenario(),
    port: int = typer.Option(
        8000, "--port", metavar="PORT", help="Port on 127.0.0.1 (0 picks a free one)."
    ),
    host: str = typer.Option("127.0.0.1", "--host", metavar="ADDRESS", help="Address to bind."),
    load_time: float | None = typer.Option(
        None,
        "--load-time",
        metavar="DURATION",
        parser=seconds,
        help="How long /health answers 503: 0, 5s (default: the scenario's).",
    ),
    profile_dir: Path | None = flags.profile_dir(),
    otlp_traces_endpoint: str | None = typer.Option(
        None,
        "--otlp-traces-endpoint",
        metavar="URL",
        help="Export vLLM's llm_request spans to this OTLP/HTTP URL (needs opentelemetry-sdk).",
    ),
    parent_pid: int | None = typer.Option(
        None,
        "--parent-pid",
        metavar="PID",
        hidden=True,
        help="Stop when this process, the parent, ends.",
    ),
) -> None:
    spec = TwinSpec(
        scenario=scenario,
        host=host,
        port=port,
        load_time_s=load_time,
        profile_dir=profile_dir,
        otlp_traces_endpoint=otlp_traces_endpoint,
        parent_pid=parent_pid,
    )
    api.serve_twin(spec)
