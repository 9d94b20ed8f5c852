"""Queueing for the step budget is the budget's finding, end to end on the twin (issue 32).

Large models at TP ≥ 2 with a 512-token `max_num_batched_tokens` and prompts of 700
tokens (fewer than 1.5 budgets each): requests wait with 240 of 256
seats free and the KV cache a few percent full. Before, the map said "no bottleneck
explains it"; the rule now measures the budget's throughput (the tokens a step leaves
after its decodes against a prompt, the prompts arriving against what its steps leave)
and names it. A healthy budget on the same model is not blamed. Each run is a few seconds
of load on the real-time twin (fixed scenario seed, a seeded synthetic workload); no
assertion depends on a latency figure.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infertriage.api.diagnose import DiagnoseSpec, diagnose
from infertriage.schemas import Diagnosis, Layer

RULE = "scheduling.prefill_token_budget"
# prompts of 700 tokens (under 1.5 budgets of 512), short answers: the level's streams end
# within seconds of its end, so the run is not the drain's
WORKLOAD = "synthetic:input=700,output=48"


def _scenario(model: str, gpu: str, tp: int, budget: int) -> str:
    return f"""\
description: {model} at TP {tp} on {gpu}, a {budget}-token step budget
model: {model}
dtype: bf16
gpu: {gpu}
tensor_parallel: {tp}
interconnect: nvlink
engine:
  max_num_seqs: 256
  max_num_batched_tokens: {budget}
  max_model_len: 8192
  enable_chunked_prefill: true
seed: 0
"""


def _run(tmp_path: Path, text: str, slo: str) -> Diagnosis:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(text)
    spec = DiagnoseSpec(
        scenario=str(scenario),
        duration_s=6.0,
        out=tmp_path / "run",
        slo=slo,
        workload=WORKLOAD,
    )
    return diagnose(spec).diagnosis


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "gpu", "tp"),
    [("llama-3.1-70b", "H200", 2), ("llama-3.1-405b", "H200", 8)],
    ids=["70b-tp2", "405b-tp8"],
)
def test_a_budget_below_a_prompt_is_named_with_its_throughput(
    model: str, gpu: str, tp: int, tmp_path: Path
) -> None:
    d = _run(tmp_path, _scenario(model, gpu, tp, 512), "ttft_p95=200ms,itl_p95=200ms")
    findings = {f.id: f for f in d.layer(Layer.SCHEDULING).findings}
    assert RULE in findings, [f.title for f in findings.values()]
    budget = findings[RULE]
    assert "the budget of 512 tokens/step" in budget.title
    assert "decodes" in budget.title and "prompts a step" in budget.title
    assert any("--max-num-batched-tokens" in step for step in budget.next_steps)
    # a TTFT miss is the budget's, never "no bottleneck explains it"
    if d.primary is not None:
        assert d.primary.finding == RULE
    else:
        assert d.unexplained is None or "contention" in d.unexplained.line


@pytest.mark.slow
def test_a_budget_with_room_is_not_blamed(tmp_path: Path) -> None:
    d = _run(tmp_path, _scenario("llama-3.1-70b", "H200", 2, 8192), "ttft_p95=5s,itl_p95=1s")
    assert RULE not in {f.id for f in d.layer(Layer.SCHEDULING).findings}
    assert d.primary is None
