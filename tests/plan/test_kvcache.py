"""plan.kvcache: vLLM's KV block count against a logged run."""

from __future__ import annotations

import pytest

from infertriage.plan import kv_bytes_per_token, load_model, vllm_kv_cache, vllm_num_gpu_blocks
from infertriage.schemas.errors import UserError

GIB = 1024**3


def test_vllm_llama_3_1_8b_on_a_24_gib_gpu() -> None:
    # vLLM logged: 23.58 GiB GPU at 0.90, torch peak 17.06 GiB + 0.35 GiB non-torch,
    # "Available KV cache memory: 3.81 GiB", 1,952 blocks of 16 tokens (GiB figures rounded).
    per_token = kv_bytes_per_token(load_model("llama-3.1-8b"))
    plan = vllm_kv_cache(23.58 * GIB, 0.90, (17.06 + 0.35) * GIB, 16, per_token)
    assert abs(plan.num_blocks - 1952) <= 1
    assert plan.available_kv_bytes / GIB == pytest.approx(3.81, abs=0.005)
    assert plan.usable_blocks == plan.num_blocks - 1
    assert plan.kv_cache_bytes == plan.num_blocks * 16 * per_token
    assert plan.max_concurrency(8192) == pytest.approx(plan.num_blocks * 16 / 8192)
    assert vllm_num_gpu_blocks(23.58 * GIB, 0.90, 17.41 * GIB, 16, per_token) == plan.num_blocks


def test_no_room_means_no_blocks() -> None:
    plan = vllm_kv_cache(24 * GIB, 0.5, 20 * GIB, 16, 131_072)
    assert plan.num_blocks == 0 and plan.usable_blocks == 0 and plan.available_kv_bytes == 0


@pytest.mark.parametrize("util", [0.0, 1.5, -0.1])
def test_utilisation_outside_zero_one_is_a_user_error(util: float) -> None:
    with pytest.raises(UserError, match="gpu_memory_utilization"):
        vllm_kv_cache(24 * GIB, util, 1 * GIB, 16, 131_072)
