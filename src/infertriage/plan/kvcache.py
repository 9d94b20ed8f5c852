"""plan, level 1: how many paged KV blocks vLLM allocates.

Takes the GPU's total memory, `gpu_memory_utilization`, the memory that is
not KV cache (weights, activation peak, CUDA graphs, non-torch allocations),
the block size and KV bytes per token; gives a `KvCachePlan` with vLLM's
block count, the blocks a request can use (vLLM keeps one null block), the
cache's bytes and the maximum concurrency as vLLM logs it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infertriage.schemas.errors import UserError

__all__ = ["KvCachePlan", "vllm_kv_cache", "vllm_num_gpu_blocks"]


@dataclass(frozen=True, slots=True)
class KvCachePlan:
    """vLLM's KV-cache allocation on one GPU."""

    num_blocks: int
    block_size: int
    bytes_per_block: int
    available_kv_bytes: float  # vLLM's "Available KV cache memory"; zero when there is none

    @property
    def usable_blocks(self) -> int:
        """Blocks requests can hold: vLLM's block pool reserves block 0 as the null block."""
        return max(0, self.num_blocks - 1)

    @property
    def kv_cache_bytes(self) -> int:
        return self.num_blocks * self.bytes_per_block

    @property
    def num_tokens(self) -> int:
        """vLLM's "GPU KV cache size" in tokens."""
        return self.num_blocks * self.block_size

    def max_concurrency(self, tokens_per_request: int) -> float:
        """Requests of `tokens_per_request` tokens that fit at once, as vLLM logs it."""
        if tokens_per_request <= 0:
            raise UserError(f"tokens per request must be positive, not {tokens_per_request}.")
        return self.num_tokens / tokens_per_request


def vllm_kv_cache(
    total_gpu_bytes: float,
    gpu_memory_utilization: float,
    non_kv_bytes: float,
    block_size: int,
    kv_bytes_per_token: int,
) -> KvCachePlan:
    """vLLM's allocation: `floor((total × util − non_kv) / (block_size × kv_bytes_per_token))`.

    `kv_bytes_per_token` is per GPU, over all layers (`memory.kv_bytes_per_token`).
    """
    if not 0 < gpu_memory_utilization <= 1:
        raise UserError(f"gpu_memory_utilization must be in (0, 1], not {gpu_memory_utilization}.")
    if block_size <= 0 or kv_bytes_per_token <= 0:
        raise UserError("block size and KV bytes per token must be positive.")
    available = max(0.0, total_gpu_bytes * gpu_memory_utilization - non_kv_bytes)
    bytes_per_block = block_size * kv_bytes_per_token
    return KvCachePlan(
        num_blocks=math.floor(available / bytes_per_block),
        block_size=block_size,
        bytes_per_block=bytes_per_block,
        available_kv_bytes=available,
    )


def vllm_num_gpu_blocks(
    total_gpu_bytes: float,
    gpu_memory_utilization: float,
    non_kv_bytes: float,
    block_size: int,
    kv_bytes_per_token: int,
) -> int:
    """vLLM's `num_gpu_blocks` (null block included; see `KvCachePlan.usable_blocks`)."""
    plan = vllm_kv_cache(
        total_gpu_bytes, gpu_memory_utilization, non_kv_bytes, block_size, kv_bytes_per_token
    )
    return plan.num_blocks
