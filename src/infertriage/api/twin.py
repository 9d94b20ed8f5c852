"""api, level 5: the `twin` command's entry point."""

from __future__ import annotations

from pathlib import Path

from infertriage.twin.scenario import load_scenario
from infertriage.twin.server import serve

__all__ = ["serve_twin"]


def serve_twin(
    scenario: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    load_time_s: float | None = None,
    profile_dir: Path | None = None,
) -> None:
    """Load the scenario (a `UserError` if it is invalid) and serve it until interrupted."""
    loaded = load_scenario(scenario)
    if load_time_s is not None:
        engine = loaded.engine.model_copy(update={"load_time_s": load_time_s})
        loaded = loaded.model_copy(update={"engine": engine})
    if profile_dir is not None:
        profile_dir.mkdir(parents=True, exist_ok=True)
    serve(loaded, host=host, port=port, profile_dir=profile_dir)
