"""`bench --export` and `diagnose --export`: a run's levels in vLLM's and AIPerf's formats.

Against the real twin (bench, two levels) and a diagnose run directory (the fixture of
tests/fixtures/runs/diagnose); each file is checked against the tool's format as its
source defines it (tests/report/export_formats.py).
"""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest
from tests.report.export_formats import AiperfRecord, AiperfSummary, VllmResult
from typer.testing import CliRunner

from infertriage.api.diagnose import diagnose
from infertriage.api.exports import export_levels, export_run
from infertriage.api.specs import DiagnoseSpec
from infertriage.cli.app import app, main
from infertriage.schemas import RequestRecord, RunDir, UserError
from infertriage.schemas.exports import ExportFormat
from infertriage.twin.process import TwinProcess

FIXTURES = Path(__file__).parents[1] / "fixtures" / "runs"
DOCS = Path(__file__).parents[2] / "docs" / "exports.md"
_STAT = re.compile(r"^(?:mean|median|std|min|max|p90|p95|p99|p99\.9)_(.+)_s$")
BOTH = (ExportFormat.VLLM, ExportFormat.AIPERF)


def _check_exports(root: Path, levels: list[str]) -> dict[str, dict[str, object]]:
    """Every level's files are there and have their tool's shape; vLLM's results by level."""
    out = {}
    for level in levels:
        name = level.replace("=", "_")
        vllm = json.loads((root / "exports" / "vllm" / f"{name}.json").read_text())
        VllmResult.model_validate(vllm)
        folder = root / "exports" / "aiperf" / name
        AiperfSummary.model_validate_json((folder / "profile_export_aiperf.json").read_text())
        lines = (folder / "profile_export.jsonl").read_text().splitlines()
        assert len(lines) == vllm["num_prompts"]
        for line in lines:
            AiperfRecord.model_validate_json(line)
        out[level] = vllm
    return out


def test_bench_exports_each_level(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with TwinProcess("healthy", load_time_s=0.1) as twin:
        done = CliRunner().invoke(
            app,
            ["bench", "--url", twin.url, "--concurrency", "2,4", "--num-requests", "8",
             "--workload", "synthetic:input=32,output=8", "--out", str(out), "--json",
             "--export", "vllm", "--export", "aiperf", "--no-tokenize-check"],
        )  # fmt: skip
    assert done.exit_code == 0, done.output
    results = _check_exports(out, ["concurrency=2", "concurrency=4"])
    for users, result in zip((2, 4), results.values(), strict=True):
        assert result["max_concurrency"] == users and result["request_rate"] == "inf"
        assert result["completed"] == 8 and result["total_output_tokens"] == 64
        assert result["output_lens"] == [8] * 8 and result["backend"] == "openai-chat"
    _assert_csv_documented(out)
    info = RunDir.open(out).read_info()
    assert info.spec["exports"] == ["vllm", "aiperf"]  # stored with the spec
    # diagnose --from-run of the same run writes its exports too (vLLM's only, here)
    shutil.rmtree(out / "exports")
    diagnose(DiagnoseSpec(from_run=out, exports=("vllm",)))
    assert sorted(p.name for p in (out / "exports").iterdir()) == ["vllm"]
    assert len(list((out / "exports" / "vllm").glob("*.json"))) == 2


def _assert_csv_documented(root: Path) -> None:
    """Each column of requests.csv and summary.csv has its line in docs/exports.md."""
    docs = DOCS.read_text(encoding="utf-8")
    for name in ("requests.csv", "summary.csv"):
        with (root / name).open(encoding="utf-8") as handle:
            header = next(csv.reader(handle))
        for column in header:
            stat = _STAT.match(column)
            shown = f"`{stat.group(1)}`" if stat and name == "summary.csv" else f"`{column}`"
            assert shown in docs, f"docs/exports.md does not document {name}'s {column}"


def test_a_diagnose_run_exports_its_levels(tmp_path: Path) -> None:
    root = Path(shutil.copytree(FIXTURES / "diagnose", tmp_path / "diagnose"))
    written = export_run(root, BOTH)
    assert len(written) == 3
    result = _check_exports(root, ["concurrency=16"])["concurrency=16"]
    records = list(RunDir.open(root).iter_records(root / "requests.jsonl", RequestRecord))
    assert result["model_id"] == "llama-3.1-8b" and result["max_concurrency"] == 16
    assert result["completed"] == len(records) == 2
    (level,) = export_levels(root)
    assert level.mode == "concurrency" and level.value == 16.0 and not level.interrupted


def test_a_run_of_another_command_is_refused(tmp_path: Path) -> None:
    root = Path(shutil.copytree(FIXTURES / "validate", tmp_path / "validate"))
    with pytest.raises(UserError, match="validate run; bench and diagnose export"):
        export_run(root, (ExportFormat.VLLM,))


def test_export_flags_are_checked_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "--url", "http://127.0.0.1:9", "--export", "vllm,csv", "--no-progress"]
    assert main(argv) == 2  # before any request: the URL is not even tried
    assert "--export 'csv': give vllm, aiperf, timeline." in capsys.readouterr().err
    scrape = tmp_path / "metrics.txt"
    scrape.write_text("vllm:num_requests_running 1\n")
    with pytest.raises(UserError, match="--export needs a run directory"):
        diagnose(DiagnoseSpec(metrics_file=scrape, exports=("aiperf",)))
