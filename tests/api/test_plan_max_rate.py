"""`plan --from-run` of a run that searched its max rate plans one replica at that rate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infertriage.analyze.stats.latency import Slo
from infertriage.cli import main
from infertriage.loadgen.maxrate import MaxRateRule, MaxRateSearch, judge_attainment
from infertriage.report.maxrate import max_rate_to_json
from infertriage.schemas import (
    BenchRunInfo,
    BenchSummary,
    Chunk,
    JsonlWriter,
    RequestRecord,
    RunDir,
)

PLAN = ["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--json"]


def _search_json() -> dict[str, object]:
    """A search that held at 8 req/s and failed at 10 and 9 (bracket [8, 9])."""
    search = MaxRateSearch(probe_rps=10.0, tolerance=0.15)
    step = search.first()  # 8 req/s
    for met in (200, 100, 120):  # 8 holds, 10 fails, 9 fails
        assert step is not None
        step = search.record(judge_attainment(step.rate, met, 200, target=0.9))
    assert step is None
    found = search.result(MaxRateRule.ATTAINMENT, 0.9, (Slo("ttft", 0.3),))
    assert found.max_rate == 8.0 and found.bracket == (8.0, 9.0)
    document = max_rate_to_json(found)
    assert document is not None
    return document


def _record(i: int, level: str, *, prompt: int, output: int, latency: float) -> RequestRecord:
    start = i * 0.125
    return RequestRecord(
        id=f"{level}-{i}",
        scheduled_ts=start,
        sent_ts=start,
        first_token_ts=start + 0.05,
        last_token_ts=start + latency,
        end_ts=start + latency,
        chunks=(Chunk(start + 0.05, 1),),
        prompt_tokens=prompt,
        output_tokens=output,
        labels={"level": level},
    )


def _run(tmp_path: Path) -> Path:
    run = RunDir.create(tmp_path / "run")
    summary = BenchSummary.model_validate({"status": "complete", "max_rate": _search_json()})
    run.write_info(BenchRunInfo(wall_anchor_s=0.0, summary=summary))
    with JsonlWriter(run.requests) as writer:
        for i in range(40):  # the probe: other lengths, 64 in flight; not the capacity
            writer.write(_record(i, "probe concurrency=64", prompt=2000, output=50, latency=8.0))
        for i in range(80):  # the level at 8 req/s: 0.125 s apart, 0.5 s each
            writer.write(_record(i, "rate=8", prompt=500, output=100, latency=0.5))
    return run.root


def test_plan_from_a_max_rate_run_uses_the_rate_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _run(tmp_path)
    assert main([*PLAN, "--from-run", str(root), "--rate", "30"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["inputs"]["input_len"] == 500 and document["inputs"]["output_len"] == 100
    assert document["inputs"]["concurrency"] == 4  # 8 req/s × 0.5 s, the probe left out
    found = document["from_run"]["max_rate"]
    assert found["max_rate"] == 8.0 and found["bracket_high"] == 9.0
    assert found["slos"] == {"ttft": 0.3} and found["attainment"] == 1.0
    assert document["from_run"]["replicas_at_rate"] == 4  # 30 / 8, rounded up
    assert main([*PLAN[:-1], "--from-run", str(root)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Measured capacity (the run's goodput search): 8 req/s per replica" in out
    assert "attainment ≥ 90% of requests meeting ttft ≤ 300 ms" in out
