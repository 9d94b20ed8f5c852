"""cli, level 6: `infertriage validate` — parse, call `api.validate`, render the checklist."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.console import Console

from infertriage.api.specs import ClientSpec, ValidateSpec, parse_endpoint
from infertriage.api.validate import validate as run_validate
from infertriage.api.validate import validate_to_json
from infertriage.cli.common import live_view, print_json
from infertriage.cli.options import (
    http_url,
    new_file,
    non_negative,
    positive,
    scenario_name,
    seconds,
    workload_spec,
)
from infertriage.report.validate import checklist_markdown, render_checklist
from infertriage.schemas import Interrupted


def validate(
    url: str | None = typer.Option(
        None, "--url", callback=http_url, help="Server base URL; without it, the twin."
    ),
    scenario: str = typer.Option(
        "healthy", "--scenario", callback=scenario_name, help="Twin scenario (name or YAML)."
    ),
    slo: str | None = typer.Option(None, "--slo", help="FILE or ttft_p95=200ms,itl_p95=50ms."),
    soak: float = typer.Option(
        "0",
        "--soak",
        parser=seconds,
        callback=non_negative,
        help="Soak length at a steady rate, e.g. 30m.",
    ),
    soak_rate: float | None = typer.Option(
        None,
        "--soak-rate",
        callback=positive,
        help="Soak requests/s (default --rate, else ½ the measured).",
    ),
    rate: float | None = typer.Option(
        None, "--rate", callback=positive, help="Expected peak requests/s."
    ),
    concurrency: int | None = typer.Option(
        None, "--concurrency", callback=positive, help="Or a closed loop."
    ),
    duration: float = typer.Option(
        "60s",
        "--duration",
        parser=seconds,
        callback=positive,
        help="Length of the performance level: 60, 90s, 2m.",
    ),
    num_requests: int | None = typer.Option(
        None, "--num-requests", callback=positive, help="Or a request count."
    ),
    workload: str = typer.Option(
        "chat-mix", "--workload", callback=workload_spec, help="Workload spec or file."
    ),
    model: str | None = typer.Option(None, "--model", help="Served model name."),
    endpoint: str = typer.Option("chat", "--endpoint", help="chat or completions."),
    api_key: str | None = typer.Option(None, "--api-key", help="Or OPENAI_API_KEY."),
    metrics_url: str | None = typer.Option(
        None, "--metrics-url", callback=http_url, help="Default URL/metrics."
    ),
    dcgm_url: str | None = typer.Option(
        None, "--dcgm-url", callback=http_url, help="dcgm-exporter /metrics."
    ),
    server_pid: int | None = typer.Option(
        None, "--server-pid", callback=positive, help="The server's process."
    ),
    skip_functional: bool = typer.Option(False, "--skip-functional", help="No probes."),
    markdown: Path | None = typer.Option(
        None, "--markdown", callback=new_file, help="Also write Markdown here."
    ),
    seed: int = typer.Option(0, "--seed", callback=non_negative, help="Workload seed."),
    tokenizer: Path | None = typer.Option(None, "--tokenizer", help="The model's tokenizer.json."),
    max_model_len: int | None = typer.Option(
        None,
        "--max-model-len",
        callback=positive,
        help="The server's context, where it does not say it.",
    ),
    out: Path | None = typer.Option(None, "--out", help="Run directory."),
    force: bool = typer.Option(False, "--force", help="Replace the run already in --out."),
    locust_workers: int | None = typer.Option(
        None, "--locust-workers", callback=positive, help="Drive the load with Locust: N workers."
    ),
    locust_master_host: str | None = typer.Option(
        None, "--locust-master-host", help="HOST[:PORT] the master binds; workers join it."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
    progress: bool = typer.Option(
        True, "--progress/--no-progress", help="Live view on stderr (in a terminal only)."
    ),
    long_generation_max_s: float = typer.Option(
        "0",
        "--long-generation-max-s",
        parser=seconds,
        callback=non_negative,
        help="Send the longest generation allowed, for at most this long (0: not run).",
    ),
) -> int:
    client = ClientSpec(
        model=model,
        endpoint=parse_endpoint(endpoint),
        api_key=api_key or os.environ.get("OPENAI_API_KEY"),
        tokenizer=tokenizer,
        max_model_len=max_model_len,
    )
    spec = ValidateSpec(
        url=url,
        scenario=scenario,
        client=client,
        slo=slo,
        workload=workload,
        rate=rate,
        concurrency=concurrency,
        duration_s=duration,
        num_requests=num_requests,
        soak_s=soak,
        soak_rate=soak_rate,
        metrics_url=metrics_url,
        dcgm_url=dcgm_url,
        server_pid=server_pid,
        functional=not skip_functional,
        seed=seed,
        out=out,
        force=force,
        long_generation_max_s=long_generation_max_s,
        locust_workers=locust_workers,
        locust_master_host=locust_master_host,
    )
    with live_view(json_out=json_out, progress=progress) as view:
        result = run_validate(spec, observer=view)
    title = f"Go-live checklist: {result.target} — run {result.run_dir}"
    if markdown is not None:
        markdown.write_text(checklist_markdown(result.checks, title=title, notes=result.notes))
    if json_out:
        print_json(validate_to_json(result))
    else:
        render_checklist(result.checks, Console(), title=title, notes=result.notes)
    if result.interrupted:
        raise Interrupted(
            f"the checklist judges only what ran before the interrupt; the run is kept in "
            f"{result.run_dir}."
        )
    return 0 if result.ready else 1
