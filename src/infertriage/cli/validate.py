"""cli, level 6: `infertriage validate` — parse, call `api.validate`, render the checklist."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from infertriage.api.specs import ClientSpec, ValidateSpec, parse_endpoint
from infertriage.api.validate import validate as run_validate
from infertriage.api.validate import validate_to_json
from infertriage.cli import flags
from infertriage.cli.common import live_view, print_json, server_or_twin
from infertriage.cli.options import seconds
from infertriage.report.validate import checklist_markdown, render_checklist
from infertriage.schemas import Interrupted
from infertriage.workload import WorkloadSpec


def validate(
    context: typer.Context,
    url: str | None = flags.url(),
    scenario: str = flags.scenario(),
    slo: str | None = flags.slo(),
    soak: float = typer.Option(
        "0",
        "--soak",
        metavar="DURATION",
        parser=seconds,
        help="Soak length at a steady rate, e.g. 30m.",
    ),
    soak_rate: float | None = typer.Option(
        None,
        "--soak-rate",
        metavar="RATE",
        help="Soak requests/s (default --rate, else ½ the measured).",
    ),
    rate: float | None = flags.rate(),
    concurrency: int | None = flags.concurrency(),
    duration: float | None = flags.duration(),  # None: 60 s (--standard mlperf: 600 s)
    num_requests: int | None = flags.num_requests(),
    workload: WorkloadSpec = flags.workload(),
    model: str | None = flags.served_model(),
    endpoint: str = flags.endpoint(),
    api_key: str | None = flags.api_key(),
    metrics_url: str | None = flags.metrics_url(),
    dcgm_url: str | None = flags.dcgm_url(),
    server_pid: int | None = flags.server_pid(),
    skip_functional: bool = typer.Option(False, "--skip-functional", help="No probes."),
    markdown: Path | None = flags.markdown(),
    seed: int = flags.seed(),
    tokenizer: Path | None = flags.tokenizer(),
    max_model_len: int | None = flags.server_max_model_len(),
    out: Path | None = flags.out(),
    force: bool = flags.force(),
    locust_workers: int | None = flags.locust_workers(),
    locust_master_host: str | None = flags.locust_master_host(),
    standard: str | None = flags.standard(),
    mlperf_model: str | None = flags.mlperf_model(),
    json_out: bool = flags.json_out(),
    progress: bool = flags.progress(),
    long_generation_max_s: float = typer.Option(
        "0",
        "--long-generation-max-s",
        metavar="DURATION",
        parser=seconds,
        help="Send the longest generation allowed, for at most this long (0: not run).",
    ),
) -> int:
    client = ClientSpec(
        model=model,
        endpoint=parse_endpoint(endpoint),
        api_key=api_key,
        tokenizer=tokenizer,
        max_model_len=max_model_len,
    )
    spec = ValidateSpec(
        url=server_or_twin(context, url, offline=False),
        scenario=scenario,
        client=client,
        slo=slo,
        workload=workload.text,
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
        standard=standard,
        mlperf_model=mlperf_model,
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
