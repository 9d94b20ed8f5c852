"""`diagnose --from-run` on every kind of run directory (`api.runview`).

Real runs against a server on 127.0.0.1 — bench, validate, `compare --url` —
and hand-made ones (empty, no requests, nothing finished). Each gives a map
(exit 0) or one sentence (exit 2), never a traceback. Interrupted diagnose
runs: tests/api/test_interrupt.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from infertriage.api.runview import measured_view
from infertriage.cli import main
from infertriage.schemas import BenchRunInfo, ErrorKind, JsonlWriter, RequestRecord, RunDir
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread

SMALL = ["--workload", "synthetic:input=8,output=5"]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve_in_thread(ServerConfig(behavior=Behavior(ttft_s=0.005, itl_s=0.002))) as (base, _):
        yield base


def _from_run(run: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["diagnose", "--from-run", str(run), *extra])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def _refused(run: Path, capsys: pytest.CaptureFixture[str], needle: str) -> None:
    code, out, err = _from_run(run, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and needle in lines[0], err
    assert out == "" and not (run / "diagnosis.json").exists()


def test_a_bench_run_is_diagnosed_at_its_last_level(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench"
    args = ["bench", "--url", url, "--concurrency", "1,2", "--num-requests", "6", *SMALL]
    assert main([*args, "--out", str(out), "--json"]) == 0
    code, _, err = _from_run(out, capsys, "--json")
    assert code == 0, err
    assert "the map judges the bench run's level concurrency=2." in err
    assert json.loads((out / "diagnosis.json").read_text())["schema"] == "infertriage.diagnosis/v1"
    view = measured_view(RunDir.open(out))
    assert view.main_level == "concurrency=2" and len(view.records) == 6


def test_a_validate_run_is_diagnosed_at_its_performance_phase(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "validate"
    args = ["validate", "--url", url, "--concurrency", "2", "--num-requests", "6", *SMALL]
    assert main([*args, "--skip-functional", "--out", str(out), "--json"]) in (0, 1)
    code, _, err = _from_run(out, capsys, "--json")
    assert code == 0, err
    assert measured_view(RunDir.open(out)).main_level == "performance"


def test_an_ab_run_is_refused_in_one_sentence(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ab"
    args = ["compare", "--url", url, "--url", url, "--num-requests", "4", "--blocks", "2"]
    assert main([*args, *SMALL, "--out", str(out), "--json"]) == 0
    _refused(out, capsys, "A/B run of two servers")


def test_an_empty_directory_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _refused(tmp_path, capsys, "not a run directory")


def test_a_run_without_requests_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir.create(tmp_path / "r")
    run.write_info(BenchRunInfo(wall_anchor_s=0.0, summary={"status": "running"}))
    _refused(run.root, capsys, "holds no request records")


def test_a_run_whose_requests_were_all_cut_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir.create(tmp_path / "r")
    run.write_info(BenchRunInfo(wall_anchor_s=0.0, summary={"status": "interrupted"}))
    cut = RequestRecord(
        id="x-0", scheduled_ts=0.0, sent_ts=0.1, end_ts=0.5, error_kind=ErrorKind.CLIENT,
        fault="cancelled", labels={"level": "concurrency=1"},
    )  # fmt: skip
    with JsonlWriter(run.requests) as writer:
        writer.write(cut)
    _refused(run.root, capsys, "finished")


def test_a_run_that_stored_a_renamed_or_retired_threshold_is_read(tmp_path: Path) -> None:
    """A run.json whose spec names a threshold this version renamed (`dp_min_excess`, now
    `min_excess_requests`) or no longer has is read with the rest (it was refused: "invalid
    spec in run.json (unexpected keyword argument)"). The repository's bench run, copied,
    its thresholds edited as such a version would have stored them."""
    import shutil  # noqa: PLC0415

    from infertriage.api.runview import run_spec  # noqa: PLC0415

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parents[1] / "fixtures" / "runs" / "bench", run)
    info_path = run / "run.json"
    info = json.loads(info_path.read_text(encoding="utf-8"))
    stored = dict(info["spec"]["thresholds"])
    stored.pop("min_excess_requests", None)
    stored["dp_min_excess"] = 2.5
    stored["a_threshold_retired_since"] = 0.3
    info["spec"]["thresholds"] = stored
    info_path.write_text(json.dumps(info), encoding="utf-8")
    spec = run_spec(RunDir.open(run).read_info())
    assert spec is not None and spec.thresholds is not None
    assert spec.thresholds.min_excess_requests == 2.5
    assert main(["report", str(run), "--html", str(tmp_path / "page.html")]) == 0
