"""cli, level 6: `infertriage plan` — parse, call `api.plan`, render."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from infertriage import api
from infertriage.api.specs import PlanSpec
from infertriage.cli.common import print_json
from infertriage.cli.options import fraction, milliseconds, non_negative, positive
from infertriage.report.plan import plan_to_json, render_plan


def plan(
    model: str = typer.Option(..., "--model", help="Catalog preset or path to an HF config.json."),
    gpu: str = typer.Option(..., "--gpu", help="GPU from the catalog, e.g. H100-SXM."),
    max_model_len: int = typer.Option(
        8192, "--max-model-len", callback=positive, help="Longest request (tokens)."
    ),
    concurrency: int | None = typer.Option(
        None, "--concurrency", callback=positive, help="Concurrent requests."
    ),
    num_gpus: int | None = typer.Option(
        None, "--num-gpus", callback=positive, help="GPUs available (default TP×PP)."
    ),
    gpus_per_node: int = typer.Option(8, "--gpus-per-node", callback=positive),
    tp: int = typer.Option(1, "--tp", callback=positive, help="Tensor-parallel size."),
    pp: int = typer.Option(1, "--pp", callback=positive, help="Pipeline-parallel size."),
    ep: int = typer.Option(1, "--ep", callback=positive, help="Expert-parallel size."),
    input_len: int | None = typer.Option(
        None, "--input-len", callback=positive, help="Prompt tokens per request."
    ),
    output_len: int | None = typer.Option(
        None, "--output-len", callback=positive, help="Output tokens per request."
    ),
    dtype: str = typer.Option("bf16", "--dtype", help="Weights: bf16, fp8, int8, int4, awq…"),
    kv_dtype: str = typer.Option("bf16", "--kv-dtype", help="KV cache: bf16 or fp8."),
    gpu_memory_utilization: float = typer.Option(
        0.9, "--gpu-memory-utilization", callback=fraction
    ),
    max_num_batched_tokens: int = typer.Option(8192, "--max-num-batched-tokens", callback=positive),
    what_if: list[str] = typer.Option([], "--what-if", help="KEY=V1,V2,… sweep (repeatable)."),
    measured_itl: float | None = typer.Option(
        None,
        "--measured-itl",
        parser=milliseconds,
        callback=positive,
        help="e.g. 21ms (a bare number is ms).",
    ),
    measured_throughput: float | None = typer.Option(
        None, "--measured-throughput", callback=positive, help="Output tokens/s measured."
    ),
    gpu_hour_cost: float | None = typer.Option(
        None, "--gpu-hour-cost", callback=positive, help="$ per GPU-hour."
    ),
    from_run: Path | None = typer.Option(None, "--from-run", help="Take lengths from a run."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
    traffic: Path | None = typer.Option(
        None, "--traffic", help="CSV: time, requests_per_s[, input_tokens, output_tokens]."
    ),
    slo: str | None = typer.Option(None, "--slo", help="FILE or ttft_p95=200ms,itl_p95=50ms."),
    hpa: Path | None = typer.Option(
        None, "--hpa", help="Write a HorizontalPodAutoscaler (autoscaling/v2) manifest here."
    ),
    deployment_name: str = typer.Option("llm", "--deployment", help="The HPA's Deployment."),
    namespace: str | None = typer.Option(None, "--namespace", help="The HPA's namespace."),
    cold_start: float | None = typer.Option(
        None,
        "--cold-start",
        callback=non_negative,
        help="Seconds from a replica's start to its first token.",
    ),
    spot_cost: float | None = typer.Option(
        None, "--spot-cost", callback=positive, help="$ per GPU-hour on spot instances."
    ),
    spot_interruptions: float = typer.Option(
        0.05,
        "--spot-interruptions-per-hour",
        callback=non_negative,
        help="Assumed interruptions per replica-hour.",
    ),
    spot_notice: float = typer.Option(
        120.0,
        "--spot-notice",
        callback=non_negative,
        help="Seconds of notice before an interruption (AWS: 120).",
    ),
    nvidia_smi_topo: Path | None = typer.Option(
        None, "--nvidia-smi-topo", help="`nvidia-smi topo -m` saved to a file."
    ),
    nccl_tests: list[Path] = typer.Option(
        [], "--nccl-tests", help="nccl-tests all_reduce_perf output: the measured bandwidth."
    ),
) -> None:
    spec = PlanSpec(
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
        what_if=tuple(what_if),
        measured_itl_s=measured_itl,
        measured_throughput_tok_s=measured_throughput,
        gpu_hour_cost=gpu_hour_cost,
        from_run=from_run,
        traffic=traffic,
        slo=slo,
        hpa=hpa,
        deployment_name=deployment_name,
        namespace=namespace,
        cold_start_s=cold_start,
        spot_cost=spot_cost,
        spot_interruptions_per_hour=spot_interruptions,
        spot_notice_s=spot_notice,
        nvidia_smi_topo=nvidia_smi_topo,
        nccl_tests=tuple(nccl_tests),
    )
    report = api.plan(spec)
    if json_out:
        print_json(plan_to_json(report))
    else:
        render_plan(report, Console())
