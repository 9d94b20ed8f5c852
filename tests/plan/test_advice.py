"""The parallel-strategy advice over a table of model × GPU × count cases."""

from __future__ import annotations

import pytest

from infertriage.plan import (
    PlanInputs,
    advise_parallelism,
    get_gpu,
    load_model,
    smallest_replica_tp,
)


def _advise(model: str, gpu: str, num_gpus: int, dtype: str = "bf16") -> tuple[int, int, bool, int]:
    inputs = PlanInputs(
        model=load_model(model),
        gpu=get_gpu(gpu),
        max_model_len=8192,
        concurrency=1,
        num_gpus=num_gpus,
        dtype=dtype,
    )
    advice = advise_parallelism(inputs)
    assert advice.reasons and all(reason.endswith(".") for reason in advice.reasons)
    return advice.tp, advice.pp, advice.ep, advice.dp


@pytest.mark.parametrize(
    ("model", "gpu", "num_gpus", "dtype", "expected"),
    [
        # fits one GPU → one instance per GPU, data parallelism for throughput
        ("llama-3.1-8b", "H100-SXM", 8, "bf16", (1, 1, False, 8)),
        ("llama-3.1-8b", "L4", 4, "bf16", (1, 1, False, 4)),
        ("qwen2.5-7b", "A10G", 1, "bf16", (1, 1, False, 1)),
        # the smallest TP that fits inside the node
        ("llama-3.1-70b", "H100-SXM", 8, "bf16", (2, 1, False, 4)),
        ("llama-3.1-70b", "A100-40GB", 8, "bf16", (4, 1, False, 2)),
        ("llama-3.1-70b", "H200", 8, "fp8", (1, 1, False, 8)),
        # MoE → expert parallelism
        ("mixtral-8x7b", "H100-SXM", 4, "bf16", (2, 1, True, 2)),
        ("qwen3-30b-a3b", "L40S", 2, "bf16", (2, 1, True, 1)),
        ("deepseek-v3", "H200", 8, "fp8", (8, 1, True, 1)),
        # more than a node → PP across nodes, TP inside
        ("deepseek-v3", "H100-SXM", 16, "fp8", (8, 2, True, 1)),
    ],
)
def test_advice_table(
    model: str, gpu: str, num_gpus: int, dtype: str, expected: tuple[int, int, bool, int]
) -> None:
    assert _advise(model, gpu, num_gpus, dtype) == expected


def test_tp_over_pcie_warns_about_all_reduce() -> None:
    inputs = PlanInputs(
        model=load_model("llama-3.1-70b"),
        gpu=get_gpu("L40S"),
        max_model_len=8192,
        concurrency=1,
        num_gpus=8,
    )
    advice = advise_parallelism(inputs)
    assert advice.tp == 4
    assert any("PCIe" in reason for reason in advice.reasons)


def test_smallest_replica_tp_carries_the_same_load_with_headroom() -> None:
    def inputs(model: str, gpu: str, tp: int) -> PlanInputs:
        return PlanInputs(model=load_model(model), gpu=get_gpu(gpu), max_model_len=8192,
                          concurrency=64, input_len=600, output_len=256, tp=tp)  # fmt: skip

    assert smallest_replica_tp(inputs("gemma-2-9b", "H200", 2)) == 1  # fits one GPU
    assert smallest_replica_tp(inputs("llama-3.1-8b", "H100-SXM", 8)) == 1
    assert smallest_replica_tp(inputs("llama-3.1-70b", "H100-SXM", 4)) == 4  # 2 cannot
    assert smallest_replica_tp(inputs("llama-3.1-8b", "H100-SXM", 1)) == 1
