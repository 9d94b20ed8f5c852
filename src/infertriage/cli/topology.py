"""cli, level 6: `infertriage topology` — parse, call `api.topology`, render."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from infertriage.api.specs import TopologySpec
from infertriage.api.topology import topology as run_topology
from infertriage.cli import flags
from infertriage.cli.common import print_json
from infertriage.report.topology import render_topology, topology_to_json


def topology(
    model: str = flags.catalog_model(),
    gpu: str = flags.gpu(),
    nvidia_smi_topo: Path | None = flags.nvidia_smi_topo(),
    nccl_tests: list[Path] = flags.nccl_tests(),
    concurrency: int = flags.planned_concurrency(64),
    max_model_len: int = flags.planned_max_model_len(),
    input_len: int | None = flags.input_len(),
    output_len: int | None = flags.output_len(),
    dtype: str = flags.dtype(),
    json_out: bool = flags.json_out(),
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
