"""api, level 5: the `simulate` command — the twin's engine on a virtual clock."""

from __future__ import annotations

from infertriage.api.specs import SimulateSpec
from infertriage.schemas import UserError
from infertriage.twin.results import SimulationResult
from infertriage.twin.scenario import load_scenario
from infertriage.twin.simulate import simulate as run_simulation

__all__ = ["SimulateSpec", "simulate"]


def simulate(spec: SimulateSpec) -> SimulationResult:
    """The `simulate` command: the scenario's engine at `spec.rate` on a virtual clock."""
    if spec.rate <= 0:
        raise UserError(f"--rate must be positive, not {spec.rate}.")
    if spec.num_requests < 1:
        raise UserError(f"--num-requests must be at least 1, not {spec.num_requests}.")
    if spec.arrivals not in ("poisson", "constant"):
        raise UserError(f"--arrivals must be poisson or constant, not {spec.arrivals!r}.")
    for name, value in (("--input-len", spec.input_len), ("--output-len", spec.output_len)):
        if value is not None and value < 1:
            raise UserError(f"{name} must be at least 1, not {value}.")
    return run_simulation(
        load_scenario(spec.scenario),
        rate=spec.rate,
        num_requests=spec.num_requests,
        input_len=spec.input_len,
        output_len=spec.output_len,
        arrivals=spec.arrivals,  # type: ignore[arg-type]
        seed=spec.seed,
    )
