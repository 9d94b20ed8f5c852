"""`--export`: a level's records as vLLM's result JSON and AIPerf's profile exports.

Each file is checked against the format written down from the tool's source
(tests/report/export_formats.py) and its figures against the records, by the
tool's definition: vLLM's statistics in ms over successful requests, its lists in
seconds; AIPerf's record metrics in ms, its ITL our TPOT.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tests.report.export_formats import AiperfRecord, AiperfSummary, VllmResult

from infertriage.analyze.stats.latency import Slo
from infertriage.report.exports import ExportLevel, write_exports
from infertriage.report.exports.aiperf import aiperf_records, aiperf_summary
from infertriage.report.exports.level import slug
from infertriage.report.exports.vllm import vllm_result
from infertriage.schemas import Chunk, ErrorKind, RequestRecord, UserError
from infertriage.schemas.exports import ExportFormat, parse_exports

ANCHOR = 1_800_000_000.0


def _ok(index: int, sent: float, ttft: float, gap: float, tokens: int) -> RequestRecord:
    first = sent + ttft
    chunks = tuple(Chunk(first + k * gap, 1) for k in range(tokens))
    last = chunks[-1].ts
    return RequestRecord(
        id=f"r-{index}",
        scheduled_ts=sent,
        sent_ts=sent,
        first_token_ts=first,
        last_token_ts=last,
        end_ts=last + 0.001,
        headers_ts=sent + 0.002,
        chunks=chunks,
        prompt_tokens=100 + index,
        output_tokens=tokens,
        http_status=200,
        labels={"level": "concurrency=2"},
    )


def _failed(index: int, sent: float) -> RequestRecord:
    return RequestRecord(
        id=f"r-{index}",
        scheduled_ts=sent,
        sent_ts=sent,
        end_ts=sent + 0.05,
        prompt_tokens=None,
        http_status=500,
        error_kind=ErrorKind.HTTP,
        error_text="Internal Server Error",
        labels={"level": "concurrency=2"},
    )


def _level(**changes: object) -> ExportLevel:
    records = [
        _ok(0, 0.0, 0.020, 0.010, 5),
        _ok(1, 0.05, 0.040, 0.012, 4),  # in flight with the first
        _failed(2, 0.2),
        _ok(3, 0.3, 0.030, 0.008, 1),  # one token: no TPOT, no ITL
    ]
    base: dict[str, object] = {
        "name": "concurrency=2",
        "mode": "concurrency",
        "value": 2.0,
        "records": ExportLevel.sort(records[::-1]),
        "model": "llama-3.1-8b",
        "endpoint": "chat",
        "wall_anchor_s": ANCHOR,
        "generator": "infertriage test",
    }
    return ExportLevel(**{**base, **changes})  # type: ignore[arg-type]


def test_vllm_result_has_vllms_shape_and_definitions() -> None:
    level = _level()
    result = vllm_result(level)
    VllmResult.model_validate(json.loads(json.dumps(result, allow_nan=False)))
    assert result["num_prompts"] == 4 and result["completed"] == 3 and result["failed"] == 1
    assert result["backend"] == "openai-chat" and result["model_id"] == "llama-3.1-8b"
    # a closed loop of 2 users is vLLM's --max-concurrency 2 at --request-rate inf
    assert result["request_rate"] == "inf" and result["max_concurrency"] == 2
    assert result["request_goodput"] is None  # no --goodput
    # lists in send order, seconds; a failed request's TTFT, latency and output length 0
    assert result["ttfts"] == pytest.approx([0.020, 0.040, 0.0, 0.030])
    assert result["output_lens"] == [5, 4, 0, 1]
    assert result["input_lens"] == [100, 101, None, 103]
    assert result["errors"] == ["", "", "Internal Server Error", ""]
    assert result["itls"][0] == pytest.approx([0.010] * 4) and result["itls"][3] == []
    assert result["latencies"] == pytest.approx([0.060, 0.076, 0.0, 0.030])
    # statistics in ms over the successful requests
    assert result["mean_ttft_ms"] == pytest.approx(30.0)
    assert result["p99_ttft_ms"] == pytest.approx(np.percentile([20, 40, 30], 99))
    assert result["mean_tpot_ms"] == pytest.approx(np.mean([10.0, 12.0]))  # ≥ 2 tokens only
    assert result["mean_itl_ms"] == pytest.approx(np.mean([10.0] * 4 + [12.0] * 3))
    # throughput over the whole level: first send (0) to last finish (0.3 + 0.03 + 0.001)
    assert result["duration"] == pytest.approx(0.331)
    assert result["total_output_tokens"] == 10 and result["total_input_tokens"] == 304
    assert result["request_throughput"] == pytest.approx(3 / 0.331)
    # vLLM buckets whole seconds: the three successful requests all fall in second 0 (at
    # most two were in flight at one instant)
    assert result["max_concurrent_requests"] == 3


def test_vllm_result_of_a_rate_level_with_goodput() -> None:
    level = _level(
        name="rate=4",
        mode="rate",
        value=4.0,
        burstiness=0.5,
        slos=(Slo("ttft", 0.035),),
    )
    result = vllm_result(level)
    VllmResult.model_validate(result)
    assert result["request_rate"] == 4.0 and result["burstiness"] == 0.5
    assert result["max_concurrency"] is None and "mean_client_queue_time_ms" not in result
    assert result["request_goodput"] == pytest.approx(2 / 0.331)  # TTFT 20 and 30 ms


def test_aiperf_records_have_aiperfs_shape_and_units() -> None:
    level = _level()
    records = [json.loads(json.dumps(r, allow_nan=False)) for r in aiperf_records(level)]
    for record in records:
        AiperfRecord.model_validate(record)
    first, failed = records[0], records[2]
    assert [r["metadata"]["session_num"] for r in records] == [0, 1, 2, 3]
    assert first["metadata"]["request_start_ns"] == round(ANCHOR * 1e9)
    assert first["metadata"]["request_end_ns"] == round((ANCHOR + 0.061) * 1e9)
    metrics = first["metrics"]
    assert metrics["time_to_first_token"] == {"value": pytest.approx(20.0), "unit": "ms"}
    assert metrics["time_to_second_token"]["value"] == pytest.approx(10.0)  # 30 − 20 ms, as AIPerf
    assert metrics["request_latency"]["value"] == pytest.approx(60.0)
    assert metrics["inter_token_latency"]["value"] == pytest.approx(10.0)  # (60 − 20) / 4
    assert metrics["output_token_throughput_per_user"]["value"] == pytest.approx(100.0)
    assert metrics["inter_chunk_latency"]["value"] == pytest.approx([10.0] * 4)
    assert metrics["output_sequence_length"] == {"value": 5, "unit": "tokens"}
    assert failed["error"] == {"code": 500, "type": "http", "message": "Internal Server Error"}
    assert failed["metrics"] == {}
    assert "inter_token_latency" not in records[3]["metrics"]  # one token


def test_aiperf_summary_has_aiperfs_shape() -> None:
    level = _level(interrupted=True)
    summary = json.loads(json.dumps(aiperf_summary(level), allow_nan=False))
    AiperfSummary.model_validate(summary)
    assert summary["request_count"] == {"unit": "requests", "avg": 3.0}
    assert summary["error_request_count"] == {"unit": "requests", "avg": 1.0}
    assert summary["benchmark_duration"] == {"unit": "sec", "avg": pytest.approx(0.331)}
    ttft = summary["time_to_first_token"]
    assert ttft["unit"] == "ms" and ttft["count"] == 3 and ttft["avg"] == pytest.approx(30.0)
    assert ttft["p99"] == pytest.approx(np.percentile([20.0, 40.0, 30.0], 99))
    assert summary["inter_chunk_latency"]["count"] == 7
    assert summary["total_osl"]["avg"] == 10.0 and summary["was_cancelled"] is True
    assert summary["error_summary"] == [
        {
            "error_details": {"code": 500, "type": "http", "message": "Internal Server Error"},
            "count": 1,
        }
    ]
    assert "goodput" not in summary


def test_write_exports_lays_out_one_file_per_level(tmp_path: Path) -> None:
    other = _level(name="rate=8", mode="rate", value=8.0)
    written = write_exports(tmp_path, [_level(), other], (ExportFormat.AIPERF, ExportFormat.VLLM))
    names = [p.relative_to(tmp_path).as_posix() for p in written]
    assert names == [
        "exports/aiperf/concurrency_2/profile_export_aiperf.json",
        "exports/aiperf/concurrency_2/profile_export.jsonl",
        "exports/aiperf/rate_8/profile_export_aiperf.json",
        "exports/aiperf/rate_8/profile_export.jsonl",
        "exports/vllm/concurrency_2.json",
        "exports/vllm/rate_8.json",
    ]
    VllmResult.model_validate_json((tmp_path / names[-1]).read_text())
    lines = (tmp_path / names[1]).read_text().splitlines()
    assert len(lines) == 4 and all(AiperfRecord.model_validate_json(line) for line in lines)


def test_slug_makes_a_level_name_a_file_name() -> None:
    assert slug("probe concurrency=64") == "probe_concurrency_64"
    assert slug("rate=2.5") == "rate_2.5" and slug("../x") == "x" and slug("") == "level"
    assert slug("..") == "level" and slug(".hidden") == "hidden"  # no dot file, no `..`


@pytest.mark.parametrize(
    ("given", "formats"),
    [
        (["vllm"], (ExportFormat.VLLM,)),
        (["vllm,aiperf"], (ExportFormat.VLLM, ExportFormat.AIPERF)),
        (["AIPerf", "vllm", "aiperf"], (ExportFormat.AIPERF, ExportFormat.VLLM)),
        ([], ()),
    ],
)
def test_parse_exports(given: list[str], formats: tuple[ExportFormat, ...]) -> None:
    assert parse_exports(given) == formats


def test_an_unknown_export_is_one_sentence() -> None:
    with pytest.raises(UserError, match=r"--export 'csv': give vllm, aiperf, timeline\."):
        parse_exports(["vllm,csv"])
