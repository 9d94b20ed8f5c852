"""cli, level 6: `infertriage plan` — parse, call `api.plan`, render."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from infertriage import api
from infertriage.api.specs_offline import PlanSpec
from infertriage.cli import flags
from infertriage.cli.common import print_json
from infertriage.cli.options import milliseconds, seconds
from infertriage.report.plan import plan_to_json, render_plan


def plan(
    model: str = flags.catalog_model(),
    gpu: str = flags.gpu(),
    max_model_len: int = flags.planned_max_model_len(),
    concurrency: int | None = flags.planned_concurrency(None),
    num_gpus: int | None = typer.Option(
        None, "--num-gpus", metavar="N", help="GPUs available (default TP×PP)."
    ),
    gpus_per_node: int = typer.Option(
        8, "--gpus-per-node", metavar="N", help="GPUs in one node (TP stays inside one)."
    ),
    tp: int = flags.tp(),
    pp: int = flags.pp(),
    ep: int = flags.ep(),
    input_len: int | None = flags.input_len(),
    output_len: int | None = flags.output_len(),
    dtype: str = flags.dtype(),
    kv_dtype: str = typer.Option(
        "bf16", "--kv-dtype", metavar="DTYPE", help="KV cache: bf16 or fp8."
    ),
    gpu_memory_utilization: float = typer.Option(
        0.9,
        "--gpu-memory-utilization",
        metavar="SHARE",
        help="Share of GPU memory the engine takes (vLLM's --gpu-memory-utilization).",
    ),
    max_num_batched_tokens: int = typer.Option(
        8192,
        "--max-num-batched-tokens",
        metavar="TOKENS",
        help="Tokens one engine step takes (vLLM's --max-num-batched-tokens).",
    ),
    what_if: list[str] = typer.Option(
        [], "--what-if", metavar="KEY=V1,V2", help="KEY=V1,V2,… sweep (repeatable)."
    ),
    measured_itl: float | None = typer.Option(
        None,
        "--measured-itl",
        metavar="DURATION",
        parser=milliseconds,
        help="e.g. 21ms (a bare number is ms).",
    ),
    measured_throughput: float | None = typer.Option(
        None, "--measured-throughput", metavar="TOKENS/S", help="Output tokens/s measured."
    ),
    gpu_hour_cost: float | None = typer.Option(
        None, "--gpu-hour-cost", metavar="USD", help="$ per GPU-hour."
    ),
    from_run: Path | None = typer.Option(
        None, "--from-run", metavar="DIR", help="Take lengths from a run."
    ),
    json_out: bool = flags.json_out(),
    traffic: Path | None = typer.Option(
        None,
        "--traffic",
        metavar="PATH",
        help="CSV: time, requests_per_s[, input_tokens, output_tokens].",
    ),
    slo: str | None = flags.slo(),
    hpa: Path | None = typer.Option(
        None,
        "--hpa",
        metavar="PATH",
        help="Write a HorizontalPodAutoscaler (autoscaling/v2) manifest here.",
    ),
    keda: str | None = typer.Option(
        None,
        "--keda",
        metavar="URL",
        help="Prometheus's URL as KEDA reaches it: write a KEDA ScaledObject to --hpa instead.",
    ),
    deployment_name: str = typer.Option(
        "llm", "--deployment", metavar="NAME", help="The HPA's Deployment."
    ),
    namespace: str | None = typer.Option(
        None, "--namespace", metavar="NAME", help="The HPA's namespace."
    ),
    cold_start: float | None = typer.Option(
        None,
        "--cold-start",
        metavar="DURATION",
        parser=seconds,
        help="From a replica's start to its first token: 90, 90s, 2m.",
    ),
    spot_cost: float | None = typer.Option(
        None, "--spot-cost", metavar="USD", help="$ per GPU-hour on spot instances."
    ),
    spot_interruptions: float = typer.Option(
        0.05,
        "--spot-interruptions-per-hour",
        metavar="RATE",
        help="Assumed interruptions per replica-hour.",
    ),
    spot_notice: float = typer.Option(
        "120s",
        "--spot-notice",
        metavar="DURATION",
        parser=seconds,
        help="Notice before an interruption (AWS: 120s).",
    ),
    nvidia_smi_topo: Path | None = flags.nvidia_smi_topo(),
    nccl_tests: list[Path] = flags.nccl_tests(),
    rate: float | None = flags.rate(),
    kv_link_gb_s: float = typer.Option(
        50.0,
        "--kv-link-gb-s",
        metavar="GB/S",
        help="P/D: the KV link per GPU, GB/s (a 400 Gb/s RDMA NIC: 50).",
    ),
    kv_link_latency: float = typer.Option(
        "2ms",
        "--kv-link-latency",
        metavar="DURATION",
        parser=milliseconds,
        help="P/D: each KV transfer's fixed cost (a bare number is ms).",
    ),
    offload_gb: float | None = typer.Option(
        None, "--offload-gb", metavar="GIB", help="A CPU KV-offload tier per instance, GiB."
    ),
    prefix_reuse: float | None = typer.Option(
        None,
        "--prefix-reuse",
        metavar="SHARE",
        help="Share of each prompt a cached prefix covers (0-1).",
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
        keda=keda,
        deployment_name=deployment_name,
        namespace=namespace,
        cold_start_s=cold_start,
        spot_cost=spot_cost,
        spot_interruptions_per_hour=spot_interruptions,
        spot_notice_s=spot_notice,
        nvidia_smi_topo=nvidia_smi_topo,
        nccl_tests=tuple(nccl_tests),
        rate=rate,
        kv_link_gb_s=kv_link_gb_s,
        kv_link_latency_s=kv_link_latency,
        offload_gb=offload_gb,
        prefix_reuse=prefix_reuse,
    )
    report = api.plan(spec)
    if json_out:
        print_json(plan_to_json(report))
    else:
        render_plan(report, Console())
