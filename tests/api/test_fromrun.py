"""`diagnose --from-run` refuses every option it would ignore, and adds `--trace` and
`--log` to the stored run (`api.fromrun`).

The stored run is a small one written here; each refusal is one sentence naming the
flags, exit 2, with nothing written; the options it uses (`--slo`, `--json`, a key in
the environment) pass; a trace or log given again is not added twice.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from infertriage.api.diagnose import diagnose
from infertriage.api.specs import DiagnoseSpec
from infertriage.cli import main
from infertriage.schemas import (
    DiagnoseConfig,
    DiagnoseRunInfo,
    DiagnoseSummary,
    Layer,
    Phases,
    RunDir,
    Status,
)
from infertriage_testing.tracesynth import SynthSpec, trace_chunks

LOGS = Path(__file__).parents[1] / "data" / "logs"


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    run = RunDir.create(tmp_path / "run")
    phases = {"load_start_ts": 0.0, "load_end_ts": 1.0}
    run.write_info(
        DiagnoseRunInfo(
            wall_anchor_s=0.0,
            config=DiagnoseConfig(target="x"),
            summary=DiagnoseSummary(phases=Phases(**phases), main_level="x"),
        )
    )
    run.release()
    return run.root


IGNORED = [
    (["--url", "http://127.0.0.1:9"], "--url"),
    (["--scenario", "kv-pressure"], "--scenario"),
    (["--metrics-url", "http://127.0.0.1:9/metrics"], "--metrics-url"),
    (["--server-pid", "1"], "--server-pid"),
    (["--duration", "10s"], "--duration"),
    (["--concurrency", "4"], "--concurrency"),
    (["--workload", "synthetic:input=8,output=5"], "--workload"),
    (["--model", "m"], "--model"),
    (["--endpoint", "completions"], "--endpoint"),
    (["--gpu", "H100-SXM"], "--gpu"),
    (["--tp", "2"], "--tp"),
    (["--model-config", "llama-3.1-8b"], "--model-config"),
    (["--profile", "5s"], "--profile"),
    (["--force"], "--force"),
]


@pytest.mark.parametrize(("args", "flag"), IGNORED, ids=[flag for _, flag in IGNORED])
def test_each_option_it_would_ignore_is_refused(
    stored: Path, capsys: pytest.CaptureFixture[str], args: list[str], flag: str
) -> None:
    assert main(["diagnose", "--from-run", str(stored), *args]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("infertriage: error: --from-run diagnoses the run as it was recorded")
    assert f"cannot use {flag}: drop it" in line
    assert not (stored / "diagnosis.json").exists()


def test_the_options_refused_together_are_named_in_one_sentence(
    stored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scrape = tmp_path / "scrape.txt"
    scrape.write_text("vllm:num_requests_running 1\n")
    args = ["--url", "http://127.0.0.1:9", "--gpu", "H100-SXM", "--metrics-file", str(scrape)]
    assert main(["diagnose", "--from-run", str(stored), *args]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "cannot use --url, --metrics-file, --gpu: drop them" in line


def test_the_options_it_uses_pass(
    stored: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")  # not asked for: no error
    args = ["diagnose", "--from-run", str(stored), "--slo", "ttft_p95=200ms", "--json"]
    assert main(args) == 0, capsys.readouterr().err
    assert (stored / "diagnosis.json").is_file()


def test_a_trace_given_with_from_run_is_added_to_the_run_once(stored: Path, tmp_path: Path) -> None:
    trace = tmp_path / "eager.json"
    trace.write_bytes(b"".join(trace_chunks(SynthSpec(num_steps=10, cuda_graphs=False))))
    for _ in range(2):
        assert main(["diagnose", "--from-run", str(stored), "--trace", str(trace), "--json"]) == 0
    assert [p.name for p in (stored / "raw" / "traces").iterdir()] == ["00-eager.json"]
    # read by this map and by every later one, without the flag
    kernel = diagnose(DiagnoseSpec(from_run=stored)).diagnosis.layer(Layer.KERNEL)
    assert kernel.status is not Status.UNKNOWN


def test_a_log_given_with_from_run_is_added_after_the_ones_it_holds(
    stored: Path, tmp_path: Path
) -> None:
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    shutil.copyfile(LOGS / "vllm_v1_incident.log", first)
    shutil.copyfile(LOGS / "sglang_queue.log", second)
    base = ["diagnose", "--from-run", str(stored), "--json"]
    assert main([*base, "--log", str(first)]) == 0
    assert main([*base, "--log", str(first), "--log", str(second)]) == 0
    assert sorted(p.name for p in (stored / "raw" / "logs").iterdir()) == ["00-a.log", "01-b.log"]


def test_a_missing_log_is_refused_before_anything_is_written(
    stored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none.log"
    assert main(["diagnose", "--from-run", str(stored), "--log", str(missing)]) == 2
    assert "none.log does not exist" in capsys.readouterr().err
    assert not (stored / "raw" / "logs").exists()


@pytest.mark.parametrize(
    "text",
    [b"\x00" * 65536, b"Traceback? no: a shell history\nls -l\ncd /tmp\n"],
    ids=["only a NUL-filled hole", "no server's line"],
)
def test_a_log_infertriage_reads_no_line_of_adds_nothing_to_the_run(
    stored: Path, tmp_path: Path, text: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    """The log is all `--log` adds to a recorded run: one that gives no evidence is refused, as
    `infertriage logs` refuses it, where it was added without a word."""
    log = tmp_path / "server.log"
    log.write_bytes(text)
    assert main(["diagnose", "--from-run", str(stored), "--log", str(log)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--log {log} has no line infertriage reads" in err[0], err
    assert not (stored / "raw" / "logs").exists()


def test_a_log_after_a_nul_filled_hole_is_read(stored: Path, tmp_path: Path) -> None:
    """logrotate's copytruncate under a writer that goes on at its offset: NULs, then lines."""
    log = tmp_path / "server.log"
    log.write_bytes(b"\x00" * 65536 + (LOGS / "vllm_v1_incident.log").read_bytes())
    assert main(["diagnose", "--from-run", str(stored), "--log", str(log), "--json"]) == 0
    assert [p.name for p in (stored / "raw" / "logs").iterdir()] == ["00-server.log"]


@pytest.mark.parametrize("flag", ["--trace", "--log"])
def test_a_file_that_does_not_read_leaves_the_run_as_it_was(
    stored: Path, tmp_path: Path, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """(file-input sweep) A cut gzip given with --from-run was copied in first, its copy named
    in the error, and every later --from-run of the run failed on it."""
    whole = gzip.compress((LOGS / "vllm_v1_incident.log").read_bytes())
    cut = tmp_path / "cut.json.gz"  # a copy taken mid-write: gzip without its end
    cut.write_bytes(whole[: len(whole) // 2])
    assert main(["diagnose", "--from-run", str(stored), flag, str(cut)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(cut) in err[0], err  # the user's file, not a copy of it
    kept = stored / "raw"
    assert not any(p.is_file() for p in kept.rglob("*")) if kept.exists() else True
    assert main(["diagnose", "--from-run", str(stored), "--json"]) == 0
