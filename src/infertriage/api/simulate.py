"""api, level 5: the `simulate` command — the twin's engine on a virtual clock."""

from __future__ import annotations

from infertriage.schemas import UserError
from infertriage.twin.results import SimulationResult
from infertriage.twin.scenario import load_scenario
from infertriage.twin.simulate import simulate as run_simulation

__all__ = ["simulate"]


def simulate(
    *,
    scenario: str,
    rate: float,
    num_requests: int,
    input_len: int | None = None,
    output_len: int | None = None,
    arrivals: str = "poisson",
    seed: int | None = None,
) -> SimulationResult:
    if rate <= 0:
        raise UserError(f"--rate must be positive, not {rate}.")
    if num_requests < 1:
        raise UserError(f"--num-requests must be at least 1, not {num_requests}.")
    if arrivals not in ("poisson", "constant"):
        raise UserError(f"--arrivals must be poisson or constant, not {arrivals!r}.")
    for name, value in (("--input-len", input_len), ("--output-len", output_len)):
        if value is not None and value < 1:
            raise UserError(f"{name} must be at least 1, not {value}.")
    return run_simulation(
        load_scenario(scenario),
        rate=rate,
        num_requests=num_requests,
        input_len=input_len,
        output_len=output_len,
        arrivals=arrivals,  # type: ignore[arg-type]
        seed=seed,
    )
