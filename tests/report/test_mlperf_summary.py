"""LoadGen's "MLPerf Results Summary" block, in its shape, and its JSON form."""

from __future__ import annotations

import json

from infertriage.loadgen.standards import judge_server, server_settings
from infertriage.report.mlperf import summary_file, summary_text, verdict_json, with_verdicts
from infertriage.schemas import RequestRecord


def _records(n: int, spacing: float) -> list[RequestRecord]:
    return [
        RequestRecord(
            id=f"r{i}",
            scheduled_ts=i * spacing,
            sent_ts=i * spacing,
            first_token_ts=i * spacing + 0.25,
            last_token_ts=i * spacing + 0.25 + 0.02 * 9,
            end_ts=i * spacing + 0.25 + 0.02 * 9,
            output_tokens=10,
        )
        for i in range(n)
    ]


def test_an_invalid_block_names_each_constraint_and_loadgens_advice() -> None:
    settings = server_settings("llama3_1-8b", target_qps=4.0)
    text = summary_text(judge_server(_records(20, 0.25), settings, level="rate=4", sut_name="m"))
    lines = text.splitlines()
    assert lines[:6] == [
        "=" * 48,
        "MLPerf Results Summary",
        "=" * 48,
        "SUT name : m",
        "Scenario : Server",
        "Mode     : PerformanceOnly",
    ]
    for line in [
        "Result is : INVALID",
        "  Performance constraints satisfied : Yes",
        "  Min duration satisfied : NO",
        "  Min queries satisfied : NO",
        "  Early stopping satisfied: NO",
        "Recommendations:",
        " * Increase the target QPS so the loadgen pre-generates more queries.",
        " * The test exited early, before enough queries were issued.",
        "TTFT Early Stopping Result:",
        " * Would need to run at least 439 more queries,",
        "Min First Token latency (ns)                : 250000000",
        "99.00 percentile first token latency (ns)   : 250000000",
        "Mean Time to Output Token (ns)               : 20000000",
        "Test Parameters Used",
        "target_qps : 4",
        "ttft_latency (ns): 2000000000",
        "tpot_latency (ns): 100000000",
        "min_duration (ms): 600000",
        "min_query_count : 100",
        "schedule_rng_seed : 18209322760996052031",
    ]:
        assert line in lines, line
    # (20 − 1) samples over the final query's completion, 4.75 + 0.43 s
    assert f"Completed samples per second    : {19 / 5.18:.2f}" in lines


def test_a_valid_block_and_the_json_form() -> None:
    settings = server_settings("llama2-70b", target_qps=1.0)
    verdict = judge_server(_records(700, 0.9), settings, level="rate=1", sut_name="m")
    text = summary_text(verdict)
    assert "Result is : VALID" in text and "Recommendations:" not in text
    assert text.count(" * Run successful.") == 2
    assert summary_file([verdict]).startswith("# level rate=1\n" + "=" * 48)
    document = verdict_json(verdict)
    json.dumps(document)  # plain JSON
    assert document["result"] == "VALID" and document["early_stopping"]["ttft"]["needed"] == 459
    assert document["settings"]["tpot_limit_s"] == 0.2
    bench = {"levels": [{"name": "rate=1"}, {"name": "rate=2"}]}
    levels = with_verdicts(bench, [verdict])["levels"]
    assert levels[0]["mlperf"]["result"] == "VALID" and "mlperf" not in levels[1]
