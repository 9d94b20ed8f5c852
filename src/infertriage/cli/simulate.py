"""cli, level 6: `infertriage simulate` — the twin's engine on a virtual clock."""

from __future__ import annotations

import typer
from rich.console import Console

from infertriage import api
from infertriage.api.specs import SimulateSpec
from infertriage.cli import flags
from infertriage.cli.common import print_json
from infertriage.report.simulate import render_simulation
from infertriage.twin.traffic import parse_stage
from infertriage.workload import WorkloadSpec


def simulate(
    scenario: str = flags.scenario(),
    rate: float | None = flags.rate(),
    num_requests: int | None = flags.num_requests(),
    stage: list[str] = typer.Option(
        [],
        "--stage",
        metavar="RATE:DURATION",
        help="RATE:DURATION, repeatable, run back to back: 8:600 --stage 20:10m.",
    ),
    workload: WorkloadSpec | None = flags.workload(None),
    input_len: int | None = flags.input_len(),
    output_len: int | None = flags.output_len(),
    arrivals: str = typer.Option(
        "poisson",
        "--arrivals",
        "--arrival",
        metavar="PROCESS",
        help="poisson, constant or gamma:SHAPE.",
    ),
    timeout: float | None = flags.timeout(None),
    seed: int | None = flags.seed(None),
    json_out: bool = flags.json_out(),
) -> None:
    spec = SimulateSpec(
        scenario=scenario,
        rate=rate,
        num_requests=num_requests,
        stages=tuple(parse_stage(text) for text in stage),
        workload=None if workload is None else workload.text,
        input_len=input_len,
        output_len=output_len,
        arrivals=arrivals,
        timeout_s=timeout,
        seed=seed,
    )
    result = api.simulate(spec)
    if json_out:
        print_json(result.model_dump(mode="json"))
    else:
        render_simulation(result, Console())
