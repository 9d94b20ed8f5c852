"""The published schemas of the files the commands read say what their readers take.

SLO files (`load_thresholds`), twin scenarios (`load_scenario`) and JSONL workloads
(`read_jsonl_requests`): the model each schema is made from accepts what the reader
accepts and refuses what it refuses, on the packaged files and on hand-made lines.
That the committed files equal the models is tests/schemas/test_published.py.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from infertriage.api.published import json_schemas
from infertriage.schemas import UserError, load_thresholds
from infertriage.schemas.published import slo_file_model
from infertriage.schemas.thresholds import slo_file_keys
from infertriage.twin.scenario import list_scenarios, load_scenario
from infertriage.workload.file_models import JsonlRequest
from infertriage.workload.sources import read_jsonl_requests

SLO_VALUES = {"time": "200ms", "share": "5%", "tokens/s": 1500, "interactive": "batch"}


def _sample(expected: str) -> object:
    return next(value for word, value in SLO_VALUES.items() if word in expected)


@pytest.mark.parametrize("key", sorted(slo_file_keys()))
def test_each_slo_key_of_the_schema_is_read(key: str, tmp_path: Path) -> None:
    value = _sample(slo_file_keys()[key])
    path = tmp_path / "slo.yaml"
    path.write_text(yaml.safe_dump({key: value}))
    load_thresholds(str(path))  # the reader takes it
    slo_file_model().model_validate({key: value})  # and so does the schema's model


def test_an_unknown_or_null_slo_is_refused_by_both(tmp_path: Path) -> None:
    for document in ({"ttft_p99": "1s"}, {"ttft_p95": None}):
        path = tmp_path / "slo.json"
        path.write_text(json.dumps(document))
        with pytest.raises(UserError):
            load_thresholds(str(path))
        with pytest.raises(ValidationError):
            slo_file_model().model_validate(document)
    schema = json_schemas()["slo.schema.json"]
    assert schema["additionalProperties"] is False
    assert sorted(schema["properties"]) == sorted(slo_file_keys())


def _keys(data: object, prefix: str = "") -> set[str]:
    if not isinstance(data, dict):
        return set()
    found = set()
    for key, value in data.items():
        found.add(prefix + key)
        found |= _keys(value, f"{prefix}{key}.")
    return found


def _schema_keys(schema: dict[str, object]) -> set[str]:
    defs: dict[str, dict[str, object]] = schema["$defs"]  # type: ignore[assignment]
    found = set()
    for key, prop in schema["properties"].items():  # type: ignore[attr-defined]
        found.add(key)
        # a reference is the property itself, or inside anyOf (optional) or allOf (pydantic
        # before 2.9 wraps a reference that has a default)
        wrapped = [*prop.get("anyOf", []), *prop.get("allOf", [])]
        refs = [prop.get("$ref", "")] + [p.get("$ref", "") for p in wrapped]
        for ref in filter(None, refs):
            found |= {f"{key}.{inner}" for inner in defs[ref.rsplit("/", 1)[1]]["properties"]}
    return found


@pytest.mark.parametrize("name", list_scenarios())
def test_every_packaged_scenario_keeps_to_the_schema(name: str) -> None:
    load_scenario(name)
    text = resources.files("infertriage.twin").joinpath("scenarios", f"{name}.yaml").read_text()
    data = yaml.safe_load(text)
    known = _schema_keys(json_schemas()["scenario.schema.json"])
    # a section's own keys (engine.max_num_seqs), not the values of free mappings
    assert {k for k in _keys(data) if k.count(".") <= 1} - known == set()


ACCEPTED = [
    {"prompt": "Hello", "max_tokens": 16},
    {"messages": [{"role": "user", "content": "Hi"}], "output_tokens": 8, "timestamp": 0.5},
    {"input_length": 512, "output_length": 64, "timestamp_ms": 1000},
    {"prompt": "x", "prompt_tokens": 3, "ignored_key": [1, 2]},
]
REFUSED = [
    {"max_tokens": 16},  # no request
    {"messages": [], "max_tokens": 1},
    {"prompt": "x", "max_tokens": -1},
    {"prompt": "x", "timestamp": "soon"},
    {"messages": [{"role": "user"}]},
]


@pytest.mark.parametrize("line", ACCEPTED, ids=range(len(ACCEPTED)))
def test_a_jsonl_line_the_reader_takes_keeps_to_the_schema(line: dict, tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps(line) + "\n")
    assert len(read_jsonl_requests(path)) == 1
    JsonlRequest.model_validate(line)


@pytest.mark.parametrize("line", REFUSED, ids=range(len(REFUSED)))
def test_a_jsonl_line_the_reader_refuses_breaks_the_schema(line: dict, tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(UserError):
        read_jsonl_requests(path)
    with pytest.raises(ValidationError):
        JsonlRequest.model_validate(line)
