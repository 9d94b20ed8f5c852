"""cli, level 6: `infertriage diagnose` — parse, call `api.diagnose`, render the map."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.console import Console

from infertriage.api.diagnose import diagnose as run_diagnose
from infertriage.api.specs import ClientSpec, DiagnoseSpec, parse_endpoint
from infertriage.cli.common import live_view, print_json
from infertriage.cli.options import (
    gpu_name,
    http_url,
    model_name,
    new_file,
    nonempty_files,
    positive,
    scenario_name,
    seconds,
    workload_spec,
)
from infertriage.report.diagnosis import diagnosis_to_json, render_diagnosis
from infertriage.schemas import Interrupted
from infertriage.schemas.text import show_controls


def diagnose(
    url: str | None = typer.Option(
        None, "--url", callback=http_url, help="Server base URL; without it, the twin."
    ),
    scenario: str = typer.Option(
        "healthy", "--scenario", callback=scenario_name, help="Twin scenario (name or YAML)."
    ),
    metrics_url: str | None = typer.Option(
        None, "--metrics-url", callback=http_url, help="Default URL/metrics."
    ),
    dcgm_url: str | None = typer.Option(
        None, "--dcgm-url", callback=http_url, help="dcgm-exporter /metrics."
    ),
    prometheus: str | None = typer.Option(
        None,
        "--prometheus",
        callback=http_url,
        help="Read the replicas' metrics from this Prometheus instead.",
    ),
    selector: str = typer.Option("", "--selector", help='With --prometheus: job="vllm".'),
    server_pid: int | None = typer.Option(
        None, "--server-pid", callback=positive, help="The server's process."
    ),
    duration: float = typer.Option(
        "60s", "--duration", parser=seconds, callback=positive, help="Load in all: 60, 90s, 2m."
    ),
    from_run: Path | None = typer.Option(None, "--from-run", help="Re-diagnose a run dir."),
    metrics_file: Path | None = typer.Option(None, "--metrics-file", help="One scrape."),
    model: str | None = typer.Option(None, "--model", help="Served model name."),
    model_config: str | None = typer.Option(
        None, "--model-config", callback=model_name, help="Preset or config."
    ),
    gpu: str | None = typer.Option(None, "--gpu", callback=gpu_name, help="GPU, for the roofline."),
    tp: int = typer.Option(1, "--tp", callback=positive, help="Tensor-parallel size (roofline)."),
    endpoint: str = typer.Option("chat", "--endpoint", help="chat or completions."),
    api_key: str | None = typer.Option(None, "--api-key", help="Or OPENAI_API_KEY."),
    slo: str | None = typer.Option(None, "--slo", help="FILE or ttft_p95=200ms,itl_p95=50ms."),
    out: Path | None = typer.Option(None, "--out", help="Run directory."),
    force: bool = typer.Option(False, "--force", help="Replace the run already in --out."),
    trace: list[Path] = typer.Option(
        [],
        "--trace",
        callback=nonempty_files,
        help="Profiler trace or nsys SQLite export to analyse (repeatable).",
    ),
    profile: float | None = typer.Option(
        None,
        "--profile",
        parser=seconds,
        callback=positive,
        help="Server profile (/start_profile) this long in the measured level: 10, 10s.",
    ),
    profile_dir: Path | None = typer.Option(
        None, "--profile-dir", help="Where the server writes traces (VLLM_TORCH_PROFILER_DIR)."
    ),
    log: list[Path] = typer.Option(
        [],
        "--log",
        callback=nonempty_files,
        help="The server's log (vLLM, SGLang; .gz too), read after the load.",
    ),
    compare_run: Path | None = typer.Option(
        None, "--compare-run", help="A diagnosed run of the service at another GPU count."
    ),
    workload: str = typer.Option(
        "chat-mix", "--workload", callback=workload_spec, help="Workload spec or file."
    ),
    concurrency: int = typer.Option(
        16, "--concurrency", callback=positive, help="The measured level's streams."
    ),
    tokenizer: Path | None = typer.Option(None, "--tokenizer", help="The model's tokenizer.json."),
    max_model_len: int | None = typer.Option(
        None,
        "--max-model-len",
        callback=positive,
        help="The server's context, where it does not say it.",
    ),
    html: Path | None = typer.Option(
        None, "--html", callback=new_file, help="Also write the run's HTML report to this file."
    ),
    locust_workers: int | None = typer.Option(
        None, "--locust-workers", callback=positive, help="Drive the load with Locust: N workers."
    ),
    locust_master_host: str | None = typer.Option(
        None, "--locust-master-host", help="HOST[:PORT] the master binds; workers join it."
    ),
    nvidia_smi_topo: Path | None = typer.Option(
        None, "--nvidia-smi-topo", help="`nvidia-smi topo -m` saved to a file (the plan's link)."
    ),
    nccl_tests: list[Path] = typer.Option(
        [], "--nccl-tests", help="nccl-tests all_reduce_perf output: the measured bandwidth."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
    progress: bool = typer.Option(
        True, "--progress/--no-progress", help="Live view on stderr (in a terminal only)."
    ),
) -> None:
    deployment: dict[str, object] = {"tensor_parallel": tp}
    if model_config:
        deployment["model"] = model_config
    if gpu:
        deployment["gpu"] = gpu
    client = ClientSpec(
        model=model,
        endpoint=parse_endpoint(endpoint),
        api_key=api_key or os.environ.get("OPENAI_API_KEY"),
        tokenizer=tokenizer,
        max_model_len=max_model_len,
    )
    spec = DiagnoseSpec(
        url=url,
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
    )
    with live_view(json_out=json_out, progress=progress) as view:
        result = run_diagnose(spec, observer=view)
    for note in result.notes:
        typer.echo(f"note: {show_controls(note)}", err=True)
    if json_out:
        print_json(diagnosis_to_json(result.diagnosis))
    else:
        where = f" — run {result.run_dir}" if result.run_dir else ""
        title = f"Bottleneck map: {result.target}{where}"
        render_diagnosis(result.diagnosis, Console(), title=title)
    if result.html is not None:
        typer.echo(f"HTML report: {show_controls(str(result.html))}", err=True)
    if result.interrupted:
        raise Interrupted(
            f"the map judges only the load measured before the interrupt; the run is kept in "
            f"{result.run_dir}."
        )
