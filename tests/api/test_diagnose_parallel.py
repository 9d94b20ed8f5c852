"""diagnose end to end for expert and pipeline parallelism: one scrape of a vLLM server with
hot experts (hand-written dumps of the engines' own names) and one twin run of pp-bubbles."""

from __future__ import annotations

from pathlib import Path

import pytest

from infertriage.api.diagnose import diagnose
from infertriage.api.specs import DiagnoseSpec
from infertriage.schemas import Layer, Status

FIXTURES = Path(__file__).parents[1] / "fixtures" / "metrics"


def test_one_scrape_of_a_vllm_server_with_hot_experts_is_a_parallelism_bottleneck() -> None:
    result = diagnose(DiagnoseSpec(metrics_file=FIXTURES / "vllm_eplb.txt"))
    layer = result.diagnosis.layer(Layer.PARALLELISM)
    assert layer.status is Status.BOTTLENECK
    found = {f.id: f for f in layer.findings}["parallelism.expert_imbalance"]
    assert "2.5×" in found.title and "0.31" in found.title
    assert any("--enable-eplb" in step for step in found.next_steps)


def test_one_scrape_of_a_balanced_sglang_ep_server_says_nothing_of_experts() -> None:
    result = diagnose(DiagnoseSpec(metrics_file=FIXTURES / "sglang_eplb.txt"))
    findings = [f.id for layer in result.diagnosis.layers for f in layer.findings]
    assert "parallelism.expert_imbalance" not in findings


@pytest.mark.e2e
@pytest.mark.slow
def test_the_twin_with_an_unbalanced_pipeline_stage_names_the_bubble(tmp_path: Path) -> None:
    result = diagnose(DiagnoseSpec(scenario="pp-bubbles", duration_s=3.0, out=tmp_path / "run"))
    diagnosis = result.diagnosis
    # (the primary may be the front end's when this shared machine starves the twin of CPU)
    assert diagnosis.layer(Layer.PARALLELISM).status is Status.BOTTLENECK
    found = {f.id: f for f in diagnosis.layer(Layer.PARALLELISM).findings}
    bubble = found["parallelism.pipeline_bubble"]
    assert "unbalanced pipeline stage" in bubble.title and "4 stages" in bubble.title
    assert any("VLLM_PP_LAYER_PARTITION" in step for step in bubble.next_steps)
    assert "parallelism.expert_imbalance" not in found
