"""api, level 5: every JSON Schema the repository publishes under `schemas/`, from its model.

Gives `json_schemas()`: the documents of a run directory and the SLO file
(`schemas.published`), with the files the commands read that a lower level than
`schemas` defines: a twin scenario (`twin.scenario_model.Scenario`, `--scenario
FILE`) and a JSONL workload's line (`workload.file_models.JsonlRequest`,
`--workload jsonl:FILE` and `trace:FILE`). `scripts/json_schemas.py` writes
them; tests/schemas/test_published.py fails while a committed one is stale.
"""

from __future__ import annotations

from pydantic.json_schema import JsonSchemaValue

from infertriage.schemas.published import json_schemas as run_schemas
from infertriage.schemas.published import published
from infertriage.twin.scenario_model import Scenario
from infertriage.workload.file_models import JsonlRequest

__all__ = ["json_schemas"]


def json_schemas() -> dict[str, JsonSchemaValue]:
    """File name under `schemas/` → the JSON Schema its model gives."""
    scenario = Scenario.model_json_schema(mode="validation")
    workload = JsonlRequest.model_json_schema(mode="validation")
    return {
        **run_schemas(),
        "scenario.schema.json": published(
            "infertriage.scenario/v1", "twin scenario (--scenario FILE)", scenario
        ),
        "workload-jsonl.schema.json": published(
            "infertriage.workload-jsonl/v1",
            "one line of a JSONL workload (--workload jsonl:FILE, trace:FILE)",
            workload,
        ),
    }
