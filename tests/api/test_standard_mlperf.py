"""`--standard mlperf` against the real twin: a short run is INVALID, its summary kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infertriage.analyze.stats.earlystop import requests_needed
from infertriage.api.specs import ValidateSpec
from infertriage.api.validate import validate
from infertriage.cli.app import app
from infertriage.report.mlperf import SUMMARY_FILE
from infertriage.schemas import CheckStatus, RunDir, UserError
from infertriage.twin.process import TwinProcess


def test_a_five_second_mlperf_run_is_invalid_and_its_summary_written(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with TwinProcess("healthy", load_time_s=0.1) as twin:
        cli = CliRunner().invoke(
            app,
            ["bench", "--url", twin.url, "--standard", "mlperf", "--mlperf-model", "llama3_1-8b",
             "--rate", "8", "--duration", "5", "--workload", "synthetic:input=32,output=8",
             "--out", str(out)],
        )  # fmt: skip
        as_json = CliRunner().invoke(
            app,
            ["bench", "--url", twin.url, "--standard", "mlperf", "--mlperf-model", "llama2-70b",
             "--rate", "8", "--duration", "2", "--workload", "synthetic:input=32,output=8",
             "--out", str(tmp_path / "json"), "--json"],
        )  # fmt: skip
    assert cli.exit_code == 0, cli.output
    assert as_json.exit_code == 0, as_json.output
    level = json.loads(as_json.stdout)["levels"][0]
    assert level["mlperf"]["result"] == "INVALID" and level["mlperf"]["model"] == "llama2-70b"
    assert level["mlperf"]["settings"]["ttft_limit_s"] == 2.0
    for line in [
        "MLPerf Results Summary",
        "Scenario : Server",
        "Result is : INVALID",
        "  Min duration satisfied : NO",
        "  Min queries satisfied : NO",  # about 40 queries in 5 s at 8/s
        "  Early stopping satisfied: NO",
        " * Increase the target QPS so the loadgen pre-generates more queries.",
        "schedule_rng_seed : 18209322760996052031",
    ]:
        assert line in cli.stdout.splitlines(), line
    summary = (out / SUMMARY_FILE).read_text()
    assert summary.startswith("# level rate=8\n") and "Result is : INVALID" in summary
    info = RunDir.open(out).read_info()
    verdict = info.summary.levels[0]["mlperf"]
    assert isinstance(verdict, dict) and verdict["result"] == "INVALID"
    early = verdict["early_stopping"]
    assert verdict["min_duration_met"] is False and isinstance(early, dict)
    # The twin answers in milliseconds; a host stalled past the 2 s TTFT limit moves the
    # requests the claim needs as LoadGen's rule says, which is what is pinned here.
    over = early["ttft"]["num_over"]
    assert early["ttft"]["needed"] == requests_needed(0.99, over)  # 459 with none over
    if over == 0 and early["tpot"]["num_over"] == 0:
        assert verdict["performance_constraints_met"]
    assert info.spec["seed"] == 18209322760996052031 and info.spec["duration_s"] == 5.0
    document = json.loads((out / "run.json").read_text())
    assert document["summary"]["levels"][0]["mlperf"]["model"] == "llama3_1-8b"


def test_validate_with_the_standard_fails_on_its_unmet_constraints(tmp_path: Path) -> None:
    spec = ValidateSpec(
        scenario="healthy",
        rate=4,
        duration_s=3,
        functional=False,
        standard="mlperf",
        mlperf_model="llama3_1-8b",
        workload="synthetic:input=32,output=8",
        out=tmp_path / "run",
    )
    result = validate(spec)
    mlperf = {c.name: c for c in result.checks if c.name.startswith("mlperf.")}
    assert mlperf["mlperf.min_duration"].status is CheckStatus.FAIL
    assert mlperf["mlperf.min_queries"].status is CheckStatus.FAIL
    assert "more queries" in mlperf["mlperf.early_stopping"].detail
    assert mlperf["mlperf.performance_constraints"].status is CheckStatus.PASS
    assert not result.ready  # a failed constraint fails the checklist
    assert (tmp_path / "run" / SUMMARY_FILE).exists()


def test_validate_refuses_the_standard_without_a_rate_or_a_known_model(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="give --rate"):
        validate(ValidateSpec(standard="mlperf", mlperf_model="llama2-70b", out=tmp_path / "a"))
    with pytest.raises(UserError, match="--mlperf-model"):
        validate(ValidateSpec(standard="mlperf", rate=1, out=tmp_path / "b"))
