"""The JSON Schemas under schemas/ are what the models give (scripts/json_schemas.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pydantic
import pytest

from infertriage.api.published import json_schemas
from infertriage.schemas.published import render_schema

PUBLISHED = Path(__file__).parents[2] / "schemas"


def _fields(schema: dict[str, Any]) -> dict[str, tuple[list[str], list[str]]]:
    """Each model's fields and required keys: what no pydantic version spells otherwise."""
    models = {"": schema, **schema.get("$defs", {})}
    return {
        name: (sorted(model.get("properties", {})), sorted(model.get("required", [])))
        for name, model in models.items()
    }


@pytest.mark.parametrize("name", sorted(json_schemas()))
def test_the_committed_schema_is_the_models(name: str) -> None:
    path = PUBLISHED / name
    assert path.is_file(), f"run `python scripts/json_schemas.py` to write schemas/{name}"
    committed, generated = path.read_text(encoding="utf-8"), json_schemas()[name]
    hint = f"schemas/{name} differs from its model: run `python scripts/json_schemas.py`"
    if f'with pydantic {pydantic.VERSION}"' in committed:
        assert committed == render_schema(generated), hint
    else:  # written by another pydantic: the same fields, spelled its way
        assert _fields(json.loads(committed)) == _fields(generated), hint


def test_every_published_schema_has_its_model() -> None:
    assert sorted(p.name for p in PUBLISHED.glob("*.schema.json")) == sorted(json_schemas())
