"""cli, level 6: `infertriage plan` — parse, call `api.plan`, render."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from infertriage import api
from infertriage.cli.common import print_json
from infertriage.report.plan import plan_to_json, render_plan
from infertriage.schemas import parse_duration


def plan(
    model: str = typer.Option(..., "--model", help="Catalog preset or path to an HF config.json."),
    gpu: str = typer.Option(..., "--gpu", help="GPU from the catalog, e.g. H100-SXM."),
    max_model_len: int = typer.Option(8192, "--max-model-len", help="Longest request (tokens)."),
    concurrency: int | None = typer.Option(None, "--concurrency", help="Concurrent requests."),
    num_gpus: int | None = typer.Option(None, "--num-gpus", help="GPUs available (default TP×PP)."),
    gpus_per_node: int = typer.Option(8, "--gpus-per-node"),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel size."),
    pp: int = typer.Option(1, "--pp", help="Pipeline-parallel size."),
    ep: int = typer.Option(1, "--ep", help="Expert-parallel size."),
    input_len: int | None = typer.Option(None, "--input-len", help="Prompt tokens per request."),
    output_len: int | None = typer.Option(None, "--output-len", help="Output tokens per request."),
    dtype: str = typer.Option("bf16", "--dtype", help="Weights: bf16, fp8, int8, int4, awq…"),
    kv_dtype: str = typer.Option("bf16", "--kv-dtype", help="KV cache: bf16 or fp8."),
    gpu_memory_utilization: float = typer.Option(0.9, "--gpu-memory-utilization"),
    max_num_batched_tokens: int = typer.Option(8192, "--max-num-batched-tokens"),
    what_if: list[str] = typer.Option([], "--what-if", help="KEY=V1,V2,… sweep (repeatable)."),
    measured_itl: str | None = typer.Option(None, "--measured-itl", help="e.g. 21ms."),
    measured_throughput: float | None = typer.Option(
        None, "--measured-throughput", help="Output tokens/s measured."
    ),
    gpu_hour_cost: float | None = typer.Option(None, "--gpu-hour-cost", help="$ per GPU-hour."),
    from_run: Path | None = typer.Option(None, "--from-run", help="Take lengths from a run."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    report = api.plan(
        model=model,
        gpu=gpu,
        max_model_len=max_model_len,
        concurrency=concurrency,
        num_gpus=num_gpus,
        gpus_per_node=gpus_per_node,
        tp=tp,
        pp=pp,
        ep=ep,
        input_len=input_len,
        output_len=output_len,
        dtype=dtype,
        kv_dtype=kv_dtype,
        gpu_memory_utilization=gpu_memory_utilization,
        max_num_batched_tokens=max_num_batched_tokens,
        what_if=what_if,
        measured_itl_s=parse_duration(measured_itl, "ms") if measured_itl else None,
        measured_throughput_tok_s=measured_throughput,
        gpu_hour_cost=gpu_hour_cost,
        from_run=from_run,
    )
    if json_out:
        print_json(plan_to_json(report))
    else:
        render_plan(report, Console())
