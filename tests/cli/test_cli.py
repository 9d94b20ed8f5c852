"""The CLI: user errors are one sentence on stderr with exit code 2; --json is one document."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infertriage.cli import main
from infertriage.schemas import BenchRunInfo, Chunk, JsonlWriter, RequestRecord, RunDir


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "infertriage", *args]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)


def test_user_error_is_one_sentence_and_exit_2() -> None:
    result = _run("plan", "--model", "llama-9000", "--gpu", "H100-SXM", "--concurrency", "4")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("infertriage: error: ") and "llama-9000" in lines[0]
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_impossible_plan_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "--model", "llama-3.1-70b", "--gpu", "L4", "--concurrency", "1"])
    assert code == 2
    assert "before any KV cache" in capsys.readouterr().err


def test_unknown_flag_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--bogus"]) == 2
    assert "--bogus" in capsys.readouterr().err


def test_plan_json_is_one_document(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--concurrency", "32"]
    args += ["--input-len", "512", "--output-len", "256", "--json", "--what-if", "kv-dtype=fp8"]
    assert main(args) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "infertriage.plan/v1"
    assert document["kv_cache"]["bytes_per_token"] == 131_072
    assert document["headroom"]["fits_with_headroom"] is True
    assert document["advice"]["tp"] == 1
    assert document["what_if"][0]["values"] == {"kv-dtype": "fp8"}
    fidelity = document["serving_fidelity"]
    assert fidelity["covered"] is True and "under load vs real vLLM" in fidelity["statement"]
    assert set(fidelity["regimes"]) <= {"moderate", "near saturation", "overloaded"}
    for regime in fidelity["regimes"].values():
        assert {"stages", "ttft", "interval", "e2e"} == set(regime)


def test_plan_on_screen_names_the_parts(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "--model", "llama-3.1-70b", "--gpu", "H100-SXM", "--tp", "2"]
    args += ["--num-gpus", "8", "--concurrency", "16", "--gpu-hour-cost", "2.5"]
    assert main(args) == 0
    out = capsys.readouterr().out
    for needle in ("Memory per GPU", "KV cache", "Roofline", "Parallelism: TP=2", "per million"):
        assert needle in out
    assert "Model error: " in out and "Serving error: under load vs real vLLM" in out


def test_plan_off_hopper_says_its_error_under_load_is_unknown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        main(["plan", "--model", "llama-3.1-8b", "--gpu", "A100-80GB", "--concurrency", "4"]) == 0
    )
    out = " ".join(capsys.readouterr().out.split())
    assert "Serving error: no real serving measurement covers ampere GPUs" in out
    assert "error under load unknown" in out


def test_plan_from_run_takes_lengths_and_throughput(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir.create(tmp_path / "run")
    run.write_info(BenchRunInfo(wall_anchor_s=0.0))
    with JsonlWriter(run.requests) as writer:
        for i in range(10):
            start = i * 0.5
            writer.write(
                RequestRecord(
                    id=str(i),
                    scheduled_ts=start,
                    sent_ts=start,
                    first_token_ts=start + 0.1,
                    last_token_ts=start + 1.0,
                    end_ts=start + 1.0,
                    chunks=(Chunk(start + 0.1, 1),),
                    prompt_tokens=1000,
                    output_tokens=200,
                )
            )
    args = ["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--from-run", str(run.root)]
    assert main([*args, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["inputs"]["input_len"] == 1000
    assert document["inputs"]["output_len"] == 200
    assert document["from_run"]["output_tok_s"] == pytest.approx(2000 / 5.5)
    assert document["inputs"]["concurrency"] == 2  # Little's law: 10 s of latency over 5.5 s
    assert document["throughput_efficiency"] > 0


def test_from_run_of_a_plain_directory_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--from-run", str(tmp_path)]
    assert main(args) == 2
    assert "not a run directory" in capsys.readouterr().err
