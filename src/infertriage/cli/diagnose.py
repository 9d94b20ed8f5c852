"""cli, level 6: `infertriage diagnose` — parse, call `api.diagnose`, render the map."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from infertriage import api
from infertriage.cli import flags
from infertriage.cli.common import live_view, print_json, server_or_twin
from infertriage.cli.options import model_name, nonempty_files, seconds
from infertriage.schemas import Interrupted
from infertriage.schemas.text import show_controls
from infertriage.workload import WorkloadSpec


def diagnose(
    context: typer.Context,
    url: str | None = flags.url(),
    scenario: str = flags.scenario(),
    metrics_url: str | None = flags.metrics_url(),
    dcgm_url: str | None = flags.dcgm_url(),
    prometheus: str | None = flags.prometheus(),
    selector: str = flags.selector(),
    server_pid: int | None = flags.server_pid(),
    duration: float = flags.duration("60s"),
    from_run: Path | None = typer.Option(
        None, "--from-run", metavar="DIR", help="Re-diagnose a run dir."
    ),
    metrics_file: Path | None = typer.Option(
        None, "--metrics-file", metavar="PATH", help="One scrape."
    ),
    model: str | None = flags.served_model(),
    model_config: str | None = typer.Option(
        None, "--model-config", metavar="MODEL", callback=model_name, help="Preset or config."
    ),
    gpu: str | None = flags.gpu(None),
    tp: int = flags.tp(),
    pp: int = flags.pp(),
    ep: int = flags.ep(),
    endpoint: str = flags.endpoint(),
    api_key: str | None = flags.api_key(),
    slo: str | None = flags.slo(),
    out: Path | None = flags.out(),
    force: bool = flags.force(),
    trace: list[Path] = typer.Option(
        [],
        "--trace",
        metavar="PATH",
        callback=nonempty_files,
        help="Profiler trace or nsys SQLite export to analyse (repeatable).",
    ),
    profile: float | None = typer.Option(
        None,
        "--profile",
        metavar="DURATION",
        parser=seconds,
        help="Server profile (/start_profile) this long in the measured level: 10, 10s.",
    ),
    profile_dir: Path | None = flags.profile_dir(),
    log: list[Path] = typer.Option(
        [],
        "--log",
        metavar="PATH",
        callback=nonempty_files,
        help="The server's log (vLLM, SGLang; .gz too), read after the load.",
    ),
    compare_run: Path | None = typer.Option(
        None,
        "--compare-run",
        metavar="DIR",
        help="A diagnosed run of the service at another GPU count.",
    ),
    workload: WorkloadSpec | None = flags.workload(None),  # None: the scenario's, else chat-mix
    concurrency: int = flags.concurrency(16),
    tokenizer: Path | None = flags.tokenizer(),
    max_model_len: int | None = flags.server_max_model_len(),
    html: Path | None = flags.html(),
    locust_workers: int | None = flags.locust_workers(),
    locust_master_host: str | None = flags.locust_master_host(),
    nvidia_smi_topo: Path | None = flags.nvidia_smi_topo(),
    nccl_tests: list[Path] = flags.nccl_tests(),
    export: list[str] = flags.export(),
    otlp_listen: str | None = typer.Option(
        None,
        "--otlp-listen",
        metavar="HOST:PORT",
        help="Receive the server's OTLP/HTTP spans here during the run (127.0.0.1:4318; "
        "the twin is pointed there): each request's queue, prefill and decode time.",
    ),
    spans: Path | None = typer.Option(
        None,
        "--spans",
        metavar="PATH",
        help="The server's spans as a Collector file export (OTLP JSON lines), joined by trace id.",
    ),
    json_out: bool = flags.json_out(),
    progress: bool = flags.progress(),
) -> None:
    # the load generator, the analysis and the report load when a diagnosis runs, not for --help
    from infertriage.api.specs import ClientSpec, DiagnoseSpec, parse_endpoint  # noqa: PLC0415
    from infertriage.report.diagnosis import diagnosis_to_json, render_diagnosis  # noqa: PLC0415

    deployment: dict[str, object] = {"tensor_parallel": tp}
    if pp > 1:  # said only when given: the pipeline rule then reads each GPU's activity
        deployment["pipeline_parallel"] = pp
    if ep > 1:
        deployment["expert_parallel"] = ep
    if model_config:
        deployment["model"] = model_config
    if gpu:
        deployment["gpu"] = gpu
    client = ClientSpec(
        model=model,
        endpoint=parse_endpoint(endpoint),
        api_key=api_key,
        tokenizer=tokenizer,
        max_model_len=max_model_len,
    )
    spec = DiagnoseSpec(
        url=server_or_twin(context, url, offline=from_run is not None or metrics_file is not None),
        scenario=scenario,
        client=client,
        metrics_url=metrics_url,
        dcgm_url=dcgm_url,
        server_pid=server_pid,
        prometheus=prometheus,
        selector=selector,
        duration_s=duration,
        concurrency=concurrency,
        workload=workload,
        from_run=from_run,
        metrics_file=metrics_file,
        compare_run=compare_run,
        slo=slo,
        deployment=deployment,
        traces=tuple(trace),
        profile_s=profile,
        profile_dir=profile_dir,
        logs=tuple(log),
        out=out,
        force=force,
        html=html,
        locust_workers=locust_workers,
        nvidia_smi_topo=nvidia_smi_topo,
        nccl_tests=tuple(nccl_tests),
        locust_master_host=locust_master_host,
        exports=export,  # parsed by the spec (`schemas.exports`)
        otlp_listen=otlp_listen,
        spans=spans,
    )
    with live_view(json_out=json_out, progress=progress) as view:
        result = api.diagnose(spec, observer=view)
    for note in result.notes:
        typer.echo(f"note: {show_controls(note)}", err=True)
    if json_out:
        print_json(diagnosis_to_json(result.diagnosis))
    else:
        where = f" — run {result.run_dir}" if result.run_dir else ""
        title = f"Bottleneck map: {result.target}{where}"
        render_diagnosis(result.diagnosis, Console(), title=title)
        if result.workload:
            typer.echo(f"Workload: {show_controls(result.workload)}")
    if result.html is not None:
        typer.echo(f"HTML report: {show_controls(str(result.html))}", err=True)
    if result.interrupted:
        raise Interrupted(
            f"the map judges only the load measured before the interrupt; the run is kept in "
            f"{result.run_dir}."
        )
