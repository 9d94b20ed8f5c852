"""Every command, once, through the console entry point, against one real-time twin.

The floor of what the package must do at any dependency version it allows: the
lowest-versions job of CI (`make test-lowest`) runs this module on the oldest
releases `pyproject.toml` admits, and `make test` runs it on the newest. Each command
is asked for what a new user would ask of it first; the assertions check that it
answered in kind (exit code, the document it writes), not its figures.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from infertriage.cli import main
from infertriage.twin.process import TwinProcess
from infertriage_testing.tracesynth import SynthSpec, trace_chunks

_DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def twin() -> Iterator[str]:
    with TwinProcess("healthy") as served:
        yield served.url


@pytest.fixture(scope="module")
def bench_run(twin: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench") / "run"
    args = ["bench", "--url", twin, "--concurrency", "2", "--num-requests", "6"]
    assert main([*args, "--workload", "synthetic:input=32,output=8", "--out", str(out)]) == 0
    return out


def _json(capsys: pytest.CaptureFixture[str]) -> object:
    return json.loads(capsys.readouterr().out)


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert main(["--help"]) == 0
    assert main(["diagnose", "--help"]) == 0
    assert "--scenario" in capsys.readouterr().out


def test_bench_report_compare_and_baselines(
    bench_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (bench_run / "requests.jsonl").stat().st_size > 0
    assert main(["report", str(bench_run), "--html", str(tmp_path / "r.html")]) == 0
    assert (tmp_path / "r.html").read_text().lstrip().lower().startswith("<!doctype html")
    store = ["--store", str(tmp_path / "store")]
    assert main(["baseline", "save", "base", str(bench_run), *store]) == 0
    capsys.readouterr()
    assert main(["baseline", "list", *store, "--json"]) == 0
    assert "base" in json.dumps(_json(capsys))
    assert main(["compare", "base", str(bench_run), *store, "--json"]) == 0
    assert isinstance(_json(capsys), dict)


@pytest.mark.e2e
def test_diagnose_and_validate(twin: str, tmp_path: Path) -> None:
    out = tmp_path / "diag"
    assert main(["diagnose", "--url", twin, "--duration", "3", "--out", str(out), "--json"]) == 0
    assert json.loads((out / "diagnosis.json").read_text())["schema"].startswith(
        "infertriage.diagnosis/"
    )
    small = ["--workload", "synthetic:input=8,output=4", "--concurrency", "2"]
    code = main(
        ["validate", "--url", twin, "--duration", "1s", *small, "--out", str(tmp_path / "v")]
    )
    assert code in (0, 1)  # ready or not: a verdict, never a crash


def test_metrics_of_a_server_and_of_a_file(twin: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", f"{twin}/metrics", "--json"]) == 0
    assert "vllm" in json.dumps(_json(capsys))
    assert main(["metrics", str(_DATA / "vllm_cpu" / "metrics.txt"), "--json"]) == 0
    assert isinstance(_json(capsys), dict)


def test_the_offline_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = ["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM"]
    assert main([*plan, "--max-model-len", "8192", "--concurrency", "16", "--json"]) == 0
    sim = ["simulate", "--scenario", "healthy", "--rate", "4", "--num-requests", "20"]
    assert main([*sim, "--json"]) == 0
    trace = tmp_path / "decode.pt.trace.json.gz"
    with gzip.open(trace, "wb") as out:
        for chunk in trace_chunks(SynthSpec(num_steps=6)):
            out.write(chunk)
    assert main(["trace", str(trace), "--json"]) == 0
    assert main(["logs", str(_DATA / "logs" / "vllm_v1_incident.log"), "--json"]) == 0
    topo = _DATA / "topology" / "nvidia_smi_topo_h100x8_nvswitch.txt"
    assert (
        main(
            [
                "topology",
                "--nvidia-smi-topo",
                str(topo),
                "--model",
                "llama-3.1-8b",
                "--gpu",
                "H100-SXM",
                "--json",
            ]
        )
        == 0
    )
    monitor = ["monitor-config", "--engine", "vllm", "--out", str(tmp_path / "mon")]
    assert main(monitor) == 0
    assert any((tmp_path / "mon").rglob("*.json"))  # the Grafana dashboard
    capsys.readouterr()
