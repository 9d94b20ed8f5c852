"""Advice names the flags of the engine the evidence came from (its adapter's knobs);
with the engine unknown it reads as it always did (vLLM's flags, other engines in an aside)."""

from __future__ import annotations

import dataclasses

from infertriage.diagnose import RULES
from infertriage.schemas import Finding, Thresholds

from .evidence_helpers import make_evidence

SLOW = {"client__ttft_p95_s": 0.9, "client__itl_p95_s": 0.12}
QUEUED = {
    "server__queue_time_mean_s": 0.6, "server__ttft_mean_s": 0.8,
    "config__max_num_seqs": 64, "queue__running_max": 64, **SLOW,
}  # fmt: skip
PRESSED = {"kv__usage_max": 0.99, "preemptions__total": 12}
EAGER = {"trace__launch_gap_fraction": 0.6, "trace__cuda_graph_fraction": 0.0}


def _steps(rule_id: str, engine: str | None, **overrides: float) -> str:
    evidence = dataclasses.replace(make_evidence(**overrides), engine=engine)
    finding = RULES[rule_id].fn(evidence, Thresholds())
    assert isinstance(finding, Finding), rule_id
    return " | ".join(finding.next_steps)


def test_the_seat_flag_is_the_engines() -> None:
    unknown = _steps("scheduling.queue_dominates_ttft", None, **QUEUED)
    assert "raise `--max-num-seqs`" in unknown
    assert "(llama.cpp: `-np`; SGLang: `--max-running-requests`)" in unknown
    sglang = _steps("scheduling.queue_dominates_ttft", "sglang", **QUEUED)
    assert "raise `--max-running-requests`" in sglang and "--max-num-seqs" not in sglang
    assert "raise the token budget `--chunked-prefill-size`" in sglang
    vllm = _steps("scheduling.queue_dominates_ttft", "vllm", **QUEUED)
    assert "raise `--max-num-seqs`" in vllm and "llama.cpp" not in vllm
    llama = _steps("scheduling.queue_dominates_ttft", "llamacpp", **QUEUED)
    assert "raise `--parallel`" in llama


def test_with_seats_free_the_advice_is_the_token_budget_not_more_seats() -> None:
    # 14 of 128 seats used while requests queue: they wait for the step budget's prefill
    free = {**QUEUED, "config__max_num_seqs": 128, "queue__running_max": 14}
    steps = _steps("scheduling.queue_dominates_ttft", "vllm", **free)
    assert steps.startswith("raise the token budget `--max-num-batched-tokens`")
    assert "--max-num-seqs" not in steps


def test_memory_advice_per_engine() -> None:
    unknown = _steps("memory.kv_pressure", None, **PRESSED)
    assert "raise `--gpu-memory-utilization`" in unknown
    assert "lower `--max-model-len`" in unknown
    tgi = _steps("memory.kv_pressure", "tgi", **PRESSED)
    assert "raise `--cuda-memory-fraction`" in tgi
    assert "lower `--max-concurrent-requests`" in tgi
    assert "lower `--max-total-tokens`" in tgi
    trt = _steps("memory.kv_pressure", "trtllm_triton", **PRESSED)
    assert "raise `--kv_cache_free_gpu_memory_fraction`" in trt


def test_cuda_graphs_advice_per_engine() -> None:
    unknown = _steps("kernel.launch_bound", None, **EAGER)
    assert "drop `--enforce-eager` (vLLM) / `--disable-cuda-graph` (SGLang)" in unknown
    assert "drop `--disable-cuda-graph`" in _steps("kernel.launch_bound", "sglang", **EAGER)
    vllm = _steps("kernel.launch_bound", "vllm", **EAGER)
    assert "drop `--enforce-eager`" in vllm and "SGLang" not in vllm
    assert "(vLLM)" in _steps("kernel.launch_bound", "tgi", **EAGER)  # no such flag: as before
