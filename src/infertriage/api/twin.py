"""api, level 5: the `twin` command's entry point."""

from __future__ import annotations

from infertriage.api.specs import TwinSpec
from infertriage.schemas.lifeline import die_with_parent
from infertriage.twin.scenario import load_scenario
from infertriage.twin.server import serve

__all__ = ["TwinSpec", "serve_twin"]


def serve_twin(spec: TwinSpec) -> None:
    """Load the scenario (a `UserError` if it is invalid) and serve it until interrupted, or
    until `spec.parent_pid` ends (a twin a command started never outlives the command)."""
    if spec.parent_pid is not None:
        die_with_parent(spec.parent_pid)
    loaded = load_scenario(spec.scenario)
    if spec.load_time_s is not None:
        engine = loaded.engine.model_copy(update={"load_time_s": spec.load_time_s})
        loaded = loaded.model_copy(update={"engine": engine})
    if spec.profile_dir is not None:
        spec.profile_dir.mkdir(parents=True, exist_ok=True)
    serve(
        loaded,
        host=spec.host,
        port=spec.port,
        profile_dir=spec.profile_dir,
        otlp_endpoint=spec.otlp_traces_endpoint,
    )
