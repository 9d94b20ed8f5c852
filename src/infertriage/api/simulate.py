"""api, level 5: the `simulate` command — the twin's engine on a virtual clock under what a
load test sends (a workload, one rate or back-to-back stages, a client time-out)."""

from __future__ import annotations

import math

from infertriage.api.specs import SimulateSpec
from infertriage.schemas import UserError
from infertriage.twin.results import SimulationResult
from infertriage.twin.scenario import load_scenario
from infertriage.twin.simulate import simulate as run_simulation

__all__ = ["SimulateSpec", "simulate"]


def _check(spec: SimulateSpec) -> None:
    """Each range in one sentence naming its flag; the shape of the load is the library's."""
    if spec.rate is not None and not (spec.rate > 0 and math.isfinite(spec.rate)):
        raise UserError(f"--rate must be positive, not {spec.rate}.")
    if spec.num_requests is not None and spec.num_requests < 1:
        raise UserError(f"--num-requests must be at least 1, not {spec.num_requests}.")
    for name, value in (("--input-len", spec.input_len), ("--output-len", spec.output_len)):
        if value is not None and value < 1:
            raise UserError(f"{name} must be at least 1, not {value}.")
    if spec.timeout_s is not None and not (spec.timeout_s > 0 and math.isfinite(spec.timeout_s)):
        raise UserError(f"--timeout must be a positive duration, not {spec.timeout_s}.")
    for stage in spec.stages:
        if not (stage.rate > 0 and stage.duration_s > 0):
            raise UserError(f"--stage needs a positive rate and duration, not {stage}.")


def simulate(spec: SimulateSpec) -> SimulationResult:
    """The `simulate` command: the scenario's engine under the spec's load on a virtual clock."""
    _check(spec)
    return run_simulation(
        load_scenario(spec.scenario),
        rate=spec.rate,
        num_requests=spec.num_requests,
        stages=spec.stages or None,
        workload=spec.workload,
        input_len=spec.input_len,
        output_len=spec.output_len,
        arrivals=spec.arrivals,
        timeout_s=spec.timeout_s,
        seed=spec.seed,
    )
