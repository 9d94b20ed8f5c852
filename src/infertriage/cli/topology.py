"""cli, level 6: `infertriage topology` — parse, call `api.topology`, render."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from infertriage.api.specs import TopologySpec
from infertriage.api.topology import topology as run_topology
from infertriage.cli.common import print_json
from infertriage.cli.options import positive
from infertriage.report.topology import render_topology, topology_to_json


def topology(
    model: str = typer.Option(..., "--model", help="Catalog preset or path to an HF config.json."),
    gpu: str = typer.Option(..., "--gpu", help="GPU from the catalog, e.g. H100-SXM."),
    nvidia_smi_topo: Path | None = typer.Option(
        None, "--nvidia-smi-topo", help="`nvidia-smi topo -m` saved to a file."
    ),
    nccl_tests: list[Path] = typer.Option(
        [], "--nccl-tests", help="nccl-tests all_reduce_perf output (repeatable, per rank count)."
    ),
    concurrency: int = typer.Option(
        64, "--concurrency", callback=positive, help="The planned batch per replica."
    ),
    max_model_len: int = typer.Option(8192, "--max-model-len", callback=positive),
    input_len: int | None = typer.Option(None, "--input-len", callback=positive),
    output_len: int | None = typer.Option(None, "--output-len", callback=positive),
    dtype: str = typer.Option("bf16", "--dtype", help="Weights: bf16, fp8, int8, int4, awq…"),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    spec = TopologySpec(
        model=model,
        gpu=gpu,
        nvidia_smi_topo=nvidia_smi_topo,
        nccl_tests=tuple(nccl_tests),
        max_model_len=max_model_len,
        concurrency=concurrency,
        input_len=input_len,
        output_len=output_len,
        dtype=dtype,
    )
    report = run_topology(spec)
    if json_out:
        print_json(topology_to_json(report))
    else:
        render_topology(report, Console())
