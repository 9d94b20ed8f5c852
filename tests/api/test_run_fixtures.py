"""Run directories of schema v1 written before run.json was typed (tests/fixtures/runs/) read
back through the model of their command, and `report` and `diagnose --from-run` read them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pydantic import BaseModel

from infertriage.api import report as report_api
from infertriage.api.diagnose import diagnose
from infertriage.api.runview import RunSummary, run_target
from infertriage.api.specs import DiagnoseSpec, ReportSpec
from infertriage.schemas import (
    BenchRunInfo,
    CompareRunInfo,
    DiagnoseRunInfo,
    RunDir,
    UserError,
    ValidateRunInfo,
    parse_run_info,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "runs"
MODELS = {
    "bench": BenchRunInfo,
    "compare": CompareRunInfo,
    "diagnose": DiagnoseRunInfo,
    "validate": ValidateRunInfo,
}


def _copy(tmp_path: Path, command: str) -> RunDir:
    """A copy of the fixture: the readers write into the run (report.html, diagnosis.json)."""
    return RunDir.open(Path(shutil.copytree(FIXTURES / command, tmp_path / command)))


def _lost(old: object, new: object, where: str = "") -> list[str]:
    """What of `old` (a run.json) `new` (the model's dump) does not say the same."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            lost
            for key, value in old.items()
            for lost in ([f"{where}.{key}"] if key not in new else _lost(value, new[key], key))
        ]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [lost for a, b in zip(old, new, strict=True) for lost in _lost(a, b, where)]
    return [] if old == new else [f"{where}: {old!r} != {new!r}"]


def _undeclared(model: BaseModel, where: str = "") -> list[str]:
    """Keys a section of `model` kept without declaring them (`extra="allow"`)."""
    found = [f"{where}.{key}" for key in model.model_extra or {}]
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            found += _undeclared(value, f"{where}.{name}")
    return found


def test_a_fixture_per_command() -> None:
    assert sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()) == sorted(MODELS)


@pytest.mark.parametrize("command", sorted(MODELS))
def test_the_run_json_reads_back_through_its_model_with_no_key_lost(command: str) -> None:
    run = RunDir.open(FIXTURES / command)
    info = run.read_info()
    assert type(info) is MODELS[command] and info.command == command
    assert info.summary.status == "complete"
    written = json.loads(run.run_json.read_text())
    assert _lost(written, info.model_dump(mode="json", by_alias=True)) == []
    assert _undeclared(info) == []  # every key today's writers write has its field


def test_the_sections_read_as_typed_fields() -> None:
    diagnose_info = RunDir.open(FIXTURES / "diagnose").read_info()
    assert isinstance(diagnose_info, DiagnoseRunInfo)
    assert diagnose_info.config.deployment.gpu == "H100-SXM"
    assert diagnose_info.server_config.engine == "vllm"
    assert diagnose_info.summary.phases is not None
    assert diagnose_info.summary.main_level in diagnose_info.config.levels
    bench_info = RunDir.open(FIXTURES / "bench").read_info()
    assert isinstance(bench_info, BenchRunInfo)
    assert bench_info.environment.perf_counter_start_ns and bench_info.summary.levels
    assert bench_info.server_config.max_model_len == 8192
    validate_info = RunDir.open(FIXTURES / "validate").read_info()
    assert isinstance(validate_info, ValidateRunInfo) and validate_info.summary.checks
    compare_info = RunDir.open(FIXTURES / "compare").read_info()
    assert isinstance(compare_info, CompareRunInfo) and len(compare_info.config.urls) == 2


@pytest.mark.parametrize("command", sorted(MODELS))
def test_report_reads_each_fixture(tmp_path: Path, command: str) -> None:
    run = _copy(tmp_path, command)
    built = report_api.build_report(run)
    facts = dict(built.facts)
    assert built.command == command and built.levels
    assert "infertriage" in facts or command == "compare"  # an A/B run keeps no environment
    if command == "validate":
        assert built.checks
    if command == "compare":
        assert built.comparison is not None and built.target.startswith("A http")
    else:
        assert built.target == run_target(run.read_info(), "?") != "?"
    result = report_api.write_report(ReportSpec(run=run.root))
    assert result.html.is_file() and result.command == command


@pytest.mark.parametrize("command", ["bench", "diagnose", "validate"])
def test_diagnose_from_run_reads_each_fixture(tmp_path: Path, command: str) -> None:
    run = _copy(tmp_path, command)
    result = diagnose(DiagnoseSpec(from_run=run.root))
    assert result.diagnosis.layers and run.diagnosis.is_file()
    assert RunSummary.of(run).status == "complete"


def test_diagnose_from_run_refuses_the_ab_fixture(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="A/B run"):
        diagnose(DiagnoseSpec(from_run=_copy(tmp_path, "compare").root))


def test_a_run_json_of_another_schema_version_is_one_sentence(tmp_path: Path) -> None:
    document = json.loads((FIXTURES / "bench" / "run.json").read_text())
    with pytest.raises(UserError, match=r"schema 'infertriage.run/v0'.*reads infertriage.run/v1"):
        parse_run_info({**document, "schema": "infertriage.run/v0"}, "old/run.json")
    with pytest.raises(UserError, match=r"invalid run\.json"):
        parse_run_info({**document, "command": "trace"})
