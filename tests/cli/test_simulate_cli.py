"""`infertriage simulate` end to end: a workload, stages and a time-out in; per-stage tables
on screen and per-stage figures in --json."""

from __future__ import annotations

import json

import pytest

from infertriage.cli import main

LOAD = ["simulate", "--workload", "synthetic:input=64,output=16", "--arrivals", "constant"]


def test_stages_and_a_time_out_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main([*LOAD, "--stage", "2:10", "--stage", "8:5s", "--timeout", "30s", "--json"])
    assert code == 0
    document = json.loads(capsys.readouterr().out)
    first, second = document["stages"]
    assert (first["num_requests"], second["num_requests"]) == (20, 40)
    assert (first["rate_rps"], first["duration_s"], second["start_ts"]) == (2.0, 10.0, 10.0)
    assert document["num_requests"] == 60 and document["timeout_s"] == 30.0
    assert document["workload"] == "synthetic:input=64,output=16"
    for key in ("ttft", "itl", "tpot", "e2e"):
        assert set(second[key]) == {"count", "mean_s", "p50_s", "p90_s", "p95_s", "p99_s"}
    assert second["num_completed"] + second["num_failed"] == 40
    assert {"output_throughput_tok_s", "request_throughput_rps", "achieved_rate_rps"} <= set(second)


def test_a_table_per_stage_on_screen(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*LOAD, "--stage", "2:10", "--stage", "8:5"]) == 0
    out = capsys.readouterr().out
    assert "stage 1: 2 req/s for 10 s" in out and "stage 2: 8 req/s for 5 s" in out
    assert out.count("TPOT") == 3 and out.count("latency (ms)") == 3  # two stages, the run
    assert "ok/err 60/0" in out


def test_one_rate_is_one_table_with_the_old_flags(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--rate", "4", "--num-requests", "12", "--input-len", "32", "--output-len", "4"]
    assert main(["simulate", *flags]) == 0
    out = capsys.readouterr().out
    assert "12 requests at 4 req/s" in out and "stage 1" not in out
    assert out.count("latency (ms)") == 1 and "TPOT" in out and "queue time" in out


def test_the_run_states_the_twins_error_under_load(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--num-requests", "50"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Twin error: under load vs real vLLM on H100" in out
    assert "reproduced" in out
    assert main(["simulate", "--num-requests", "50", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["fidelity"].startswith("under load vs real vLLM on H100")
