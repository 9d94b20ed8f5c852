"""cli, level 6: `infertriage simulate` — the twin's engine on a virtual clock."""

from __future__ import annotations

import typer
from rich.console import Console

from infertriage import api
from infertriage.api.specs import SimulateSpec
from infertriage.cli.common import print_json
from infertriage.cli.options import non_negative, positive, scenario_name
from infertriage.report.simulate import render_simulation


def simulate(
    scenario: str = typer.Option(
        "healthy", "--scenario", callback=scenario_name, help="Packaged name or YAML path."
    ),
    rate: float = typer.Option(4.0, "--rate", callback=positive, help="Arrivals per second."),
    num_requests: int = typer.Option(
        1000, "--num-requests", callback=positive, help="Requests to simulate."
    ),
    input_len: int | None = typer.Option(
        None, "--input-len", callback=positive, help="Fixed prompt tokens."
    ),
    output_len: int | None = typer.Option(
        None, "--output-len", callback=positive, help="Fixed output tokens."
    ),
    arrivals: str = typer.Option("poisson", "--arrivals", help="poisson or constant."),
    seed: int | None = typer.Option(
        None, "--seed", callback=non_negative, help="Default: the scenario's."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    spec = SimulateSpec(
        scenario=scenario,
        rate=rate,
        num_requests=num_requests,
        input_len=input_len,
        output_len=output_len,
        arrivals=arrivals,
        seed=seed,
    )
    result = api.simulate(spec)
    if json_out:
        print_json(result.model_dump(mode="json"))
    else:
        render_simulation(result, Console())
