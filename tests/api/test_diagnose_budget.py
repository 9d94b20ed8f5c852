"""Prefill starved by the step budget, end to end on the twin (issue 17's second miss).

A 256-token `max_num_batched_tokens` with ~950-token prompts on an otherwise
healthy Llama-3.1-8B/H100 twin: before, the map had no finding at all and said
nothing of the TTFT miss. The budget is not reported over HTTP by vLLM: the rule
reads it from the engine's step-size histogram (`vllm:iteration_tokens_total`),
as it would on a real server.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infertriage.api.diagnose import DiagnoseSpec, cut_note, diagnose
from infertriage.schemas import ErrorKind, Layer, RequestRecord

SCENARIO = """\
description: a 256-token step budget with ~950-token prompts
model: llama-3.1-8b
gpu: H100-SXM
engine:
  max_num_batched_tokens: 256
  enable_chunked_prefill: true
"""


@pytest.mark.slow
def test_a_small_step_budget_is_named_with_its_knob(tmp_path: Path) -> None:
    scenario = tmp_path / "budget.yaml"
    scenario.write_text(SCENARIO)
    result = diagnose(
        DiagnoseSpec(
            scenario=str(scenario),
            duration_s=12.0,
            out=tmp_path / "run",
            workload="synthetic:input=950,output=64",
            slo="ttft_p95=0.15s,itl_p95=0.04s",
        )
    )
    d = result.diagnosis
    assert d.slowest == ()  # no --log: no "slowest requests in the server's log"
    # --from-run judges by the SLOs the run was made with, unless others are given
    assert diagnose(DiagnoseSpec(from_run=tmp_path / "run")).diagnosis.slo == d.slo
    other = diagnose(DiagnoseSpec(from_run=tmp_path / "run", slo="ttft_p95=9s"))
    assert [s.target for s in other.diagnosis.slo if s.name == "ttft_p95"] == [9.0]
    findings = {f.id: f for f in d.layer(Layer.SCHEDULING).findings}
    budget = findings["scheduling.prefill_token_budget"]
    assert "no engine step exceeded 256 tokens" in budget.title
    assert any("--max-num-batched-tokens" in step for step in budget.next_steps)
    # the TTFT miss is explained by it, or said to be unexplained — never silent
    if d.primary is not None:
        assert d.primary.finding == "scheduling.prefill_token_budget"
        assert d.symptom.startswith("TTFT p95")
    else:
        assert d.unexplained is not None


def test_a_measured_level_cut_by_the_run_is_said() -> None:
    def record(i: int, fault: str) -> RequestRecord:
        kind = ErrorKind.TIMEOUT if fault else None
        return RequestRecord(id=str(i), scheduled_ts=0.0, sent_ts=0.0, first_token_ts=0.5,
                             end_ts=1.0, error_kind=kind, fault=fault)  # fmt: skip

    assert cut_note([record(0, ""), record(1, "")], 30.0, 0.9) == []
    mine = [record(0, "run_deadline"), record(1, ""), record(2, "run_deadline")]
    note = cut_note(mine, 30.0, 0.9)
    assert note and note[0].startswith("2 of 3 requests of the measured level were still streaming")
    assert "1 s after 90% of it had finished" in note[0] and "or 30 s after it ended" in note[0]
    assert "--duration" in note[0]
    assert "90%" not in cut_note(mine, 30.0, None)[0]  # a drain that never settles
