"""`bench` end to end against the real twin: records, usage, latencies, run directory, /tokenize."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infertriage.api.bench import run_bench
from infertriage.api.specs import BenchSpec
from infertriage.cli.app import app
from infertriage.schemas import RequestRecord, RunDir, TokenSource
from infertriage.twin.process import TwinProcess

INPUT, OUTPUT, REQUESTS = 64, 24, 16


def test_bench_against_the_twin(tmp_path: Path) -> None:
    with TwinProcess("healthy", load_time_s=0.1) as twin:
        result = run_bench(
            BenchSpec(
                url=twin.url,
                concurrencies=[4],
                num_requests=REQUESTS,
                out=tmp_path / "run",
                workload=f"synthetic:input={INPUT},output={OUTPUT}",
            )
        )
        runner = CliRunner()
        cli = runner.invoke(
            app,
            ["bench", "--url", twin.url + "/v1", "--endpoint", "completions", "--rate", "8",
             "--num-requests", "8", "--workload", "synthetic:input=32,output=8",
             "--out", str(tmp_path / "cli"), "--json"],
        )  # fmt: skip
    level = result.levels[0]
    s = level.summary
    assert s.num_ok == REQUESTS and s.num_failed == 0 and not result.interrupted
    # Usage from the twin: the chat template adds 3 tokens to one message (and the twin's
    # rule splits the workload's one 10-letter word, "government", in two); min_tokens held.
    assert REQUESTS * (INPUT + 3) <= s.total_input_tokens <= REQUESTS * (INPUT + 3) * 1.02
    assert s.total_output_tokens == REQUESTS * OUTPUT and s.num_short_outputs == 0
    assert s.itl_token_level == 1.0  # continuous_usage_stats: token counts per chunk
    # A healthy 8B model on an H100 at 4 streams: TTFT tens of ms, ITL around 8 ms.
    assert s.ttft is not None and s.itl is not None and s.tpot is not None
    assert 0.002 < s.ttft.p50 < 0.5 and 0.003 < s.itl.p50 < 0.05
    assert s.tpot.mean == pytest.approx(s.itl.mean, rel=0.1)
    # /tokenize agrees with the workload and with usage.
    check = result.token_check
    assert check is not None and check.form == "vllm" and check.num_prompts == 8
    assert check.intended_tokens == 8 * INPUT and check.server_tokens is not None
    assert check.intended_tokens <= check.server_tokens <= check.intended_tokens * 1.02
    assert check.usage_tokens == check.request_tokens == check.server_tokens + 8 * 3
    assert not [w for w in result.warnings if "/tokenize" in w or "fewer output" in w]
    _assert_run_dir(tmp_path / "run", REQUESTS)
    assert cli.exit_code == 0, cli.output
    document = json.loads(cli.stdout)
    assert document["levels"][0]["completed"] == 8
    assert document["levels"][0]["total_output_tokens"] == 64
    assert document["token_check"]["usage_vs_tokenize"] == 0.0
    _assert_run_dir(tmp_path / "cli", 8)


def _assert_run_dir(root: Path, num: int) -> None:
    run = RunDir.open(root)
    names = {p.name for p in root.iterdir()}
    assert {"run.json", "requests.jsonl", "signals.jsonl", "requests.csv", "summary.csv"} <= names
    records = list(run.iter_records(run.requests, RequestRecord))
    assert len(records) == num and all(r.ok for r in records)
    assert all(r.output_tokens_source is TokenSource.USAGE for r in records)
    assert all(r.prompt_tokens_source is TokenSource.USAGE for r in records)
    assert all(r.chunks and r.end_ts is not None for r in records)
    info = run.read_info()
    assert info.command == "bench" and info.summary.status == "complete"
    assert info.summary.token_check["tokenize"] == "vllm"
    assert info.server_config.max_model_len == 8192
    assert not info.summary.model_extra  # each key of bench's --json document is a field
    with (root / "requests.csv").open(encoding="utf-8") as handle:
        assert len(list(csv.DictReader(handle))) == num
