"""cli, level 6: `infertriage simulate` — the twin's engine on a virtual clock."""

from __future__ import annotations

import typer
from rich.console import Console

from infertriage import api
from infertriage.api.specs import SimulateSpec
from infertriage.cli.common import print_json
from infertriage.cli.options import non_negative, positive, scenario_name, seconds, workload_spec
from infertriage.report.simulate import render_simulation
from infertriage.twin.traffic import parse_stage


def simulate(
    scenario: str = typer.Option(
        "healthy", "--scenario", callback=scenario_name, help="Packaged name or YAML path."
    ),
    rate: float | None = typer.Option(
        None, "--rate", callback=positive, help="Arrivals per second (default 4)."
    ),
    num_requests: int | None = typer.Option(
        None, "--num-requests", callback=positive, help="Requests to simulate (default 1000)."
    ),
    stage: list[str] = typer.Option(
        [], "--stage", help="RATE:DURATION, repeatable, run back to back: 8:600 --stage 20:10m."
    ),
    workload: str | None = typer.Option(
        None, "--workload", callback=workload_spec, help="As bench's: chat-mix, prefix:…, trace:F."
    ),
    input_len: int | None = typer.Option(
        None, "--input-len", callback=positive, help="Fixed prompt tokens."
    ),
    output_len: int | None = typer.Option(
        None, "--output-len", callback=positive, help="Fixed output tokens."
    ),
    arrivals: str = typer.Option(
        "poisson", "--arrivals", "--arrival", help="poisson, constant or gamma:SHAPE."
    ),
    timeout: float | None = typer.Option(
        None, "--timeout", parser=seconds, callback=positive, help="Client time-out per request."
    ),
    seed: int | None = typer.Option(
        None, "--seed", callback=non_negative, help="Default: the scenario's."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    spec = SimulateSpec(
        scenario=scenario,
        rate=rate,
        num_requests=num_requests,
        stages=tuple(parse_stage(text) for text in stage),
        workload=workload,
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
