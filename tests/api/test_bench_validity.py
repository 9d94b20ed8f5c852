"""The validity block against the real twin: a short run is INVALID, a long one VALID, and
bench's terminal, run.json, diagnose's map and the HTML report all say so."""

from __future__ import annotations

import dataclasses
import io
import shutil
from pathlib import Path

from rich.console import Console

from infertriage.api.bench import run_bench
from infertriage.api.diagnose import diagnose
from infertriage.api.report import ReportSpec, write_report
from infertriage.api.specs import BenchSpec, DiagnoseSpec
from infertriage.loadgen.results import BenchResult
from infertriage.report.bench import render_bench
from infertriage.report.diagnosis import render_diagnosis
from infertriage.schemas import BenchRunInfo, RunDir, Thresholds, Validity
from infertriage.twin.process import TwinProcess

WORKLOAD = "synthetic:input=32,output=8"


def _bench(
    url: str, out: Path, rate: float, num: int, thresholds: Thresholds | None = None
) -> BenchResult:
    return run_bench(
        BenchSpec(
            url=url, rates=[rate], num_requests=num, out=out, workload=WORKLOAD,
            thresholds=thresholds,
        )
    )  # fmt: skip


# the twin's healthy TTFT is ~20 ms; limits a busy test host's stalls cannot cross, so the
# long level's sample claims "within" with none over (LoadGen: 90 requests for a p95)
ROOMY = dataclasses.replace(Thresholds(), ttft_p95_s=2.0, itl_p95_s=0.5)


def _validity(result: BenchResult) -> Validity:
    validity = result.levels[0].validity
    assert validity is not None
    return validity


def _screen(render, *args: object) -> str:  # type: ignore[no-untyped-def]
    console = Console(file=io.StringIO(), width=300, color_system=None)
    render(*args, console)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(text, str)
    return text


def test_a_short_run_is_invalid_and_a_long_one_valid(tmp_path: Path) -> None:
    with TwinProcess("healthy", load_time_s=0.1) as twin:
        short = _bench(twin.url, tmp_path / "short", rate=8.0, num=16)
        long = _bench(twin.url, tmp_path / "long", rate=10.0, num=130, thresholds=ROOMY)
    # 16 requests in 2 s: too short, and too few for LoadGen's p95 rule (90 with none over)
    validity = _validity(short)
    assert validity.verdict == "INVALID"
    failed = {check.name: check for check in validity.failed}
    assert {"duration", "sample: TTFT p95", "sample: TPOT p95"} <= set(failed)
    sample = failed["sample: TTFT p95"]
    assert sample.figure.startswith("need ≥ 90 requests for a p95 TTFT claim (none over")
    assert "more requests" in sample.fix
    screen = _screen(render_bench, short)
    assert "  INVALID: duration: judged" in screen and "✗ sample: TTFT p95: need ≥ 90" in screen
    level = RunDir.open(tmp_path / "short").read_info()
    assert isinstance(level, BenchRunInfo)
    stored = level.summary.levels[0]
    assert stored["valid"] is False
    assert Validity.model_validate(stored["validity"]) == validity
    # 130 requests at 10/s, about 13 s: enough for both p95 claims, steady, at its rate
    validity = _validity(long)
    passed = {check.name for check in validity.checks if check.passed}
    assert {
        "duration", "sample: TTFT p95", "sample: TPOT p95", "rate", "output lengths",
        "prompt lengths", "steady state",
    } <= passed  # fmt: skip
    # only the client's self-check may fail here: a busy test host makes its stamps late
    assert {check.name for check in validity.failed} <= {"client"}
    if validity.valid:
        assert "  VALID" in _screen(render_bench, long)


def test_diagnose_and_the_report_say_a_short_sample_is_invalid(tmp_path: Path) -> None:
    with TwinProcess("healthy", load_time_s=0.1) as twin:
        _bench(twin.url, tmp_path / "bench", rate=8.0, num=12)
    run = tmp_path / "run"
    shutil.copytree(tmp_path / "bench", run)
    result = diagnose(DiagnoseSpec(from_run=run))
    validity = result.diagnosis.validity
    assert validity is not None and not validity.valid
    screen = _screen(render_diagnosis, result.diagnosis)
    slo_line = next(line for line in screen.splitlines() if line.startswith("SLOs:"))
    assert slo_line.endswith("— INVALID sample")
    assert "INVALID sample: need ≥ 90 requests for a p95 TTFT claim" in screen
    page = write_report(ReportSpec(run=run))
    html = page.html.read_text(encoding="utf-8")
    assert "INVALID</span> sample" in html and "need ≥ 90 requests for a p95 TTFT claim" in html
