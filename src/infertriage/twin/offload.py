"""twin, level 2: a CPU KV-offload tier: an LRU store of evicted-or-computed prefix blocks.

Takes the scenario's `offload` section (`cpu_blocks`, 0 = off; `load_gb_s`, the host→GPU
bandwidth; `store_gb_s`, GPU→host) and the KV bytes per token of the model on its GPU;
gives `OffloadTier`, modelled on vLLM's native CPU offloading (`--kv-offloading-size`,
`OffloadingConnector` with its LRU `CPUOffloadingManager`, `vllm/v1/kv_offload/`):

- write-through: every full block the GPU computes is stored to the tier once (a block
  already there is only touched), so stores cost PCIe bytes whether or not they are reused;
- the tier is LRU by block hash: storing into a full tier evicts its least recently used block;
- at admission, after the GPU prefix cache's hit, the tier is asked for the blocks that
  follow (the same chained hashes): those it holds are loaded instead of recomputed;
  lookups are counted as vLLM counts its connector's (`external_prefix_cache_queries`: the
  prompt tokens the GPU cache did not hold; `..._hits`: the tokens the tier gave);
- a load costs `bytes / load_gb_s`, which the engine adds to the step that admits the
  request (vLLM loads asynchronously while the request waits; the twin charges the step, the
  pessimistic bound); stores run on their own stream and cost no step time, only bytes and
  transfer seconds in the metrics.

`PromptSources` is vLLM's `PromptTokenStats` (`vllm/v1/metrics/stats.py`): each prompt's
tokens counted once, at its first token, as `local_compute`, `local_cache_hit` or
`external_kv_transfer`, the last one recomputed when the whole prompt was cached.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from infertriage.twin.capacity import Hardware
from infertriage.twin.scenario_model import Scenario

__all__ = ["OffloadStats", "OffloadTier", "PromptSources", "make_tier"]


@dataclass(frozen=True, slots=True)
class OffloadStats:
    """Cumulative counters of one tier (tokens, blocks, bytes, seconds)."""

    num_cpu_blocks: int
    num_used_blocks: int
    external_queries: int  # tokens asked of the tier (the GPU cache's misses), per admission
    external_hits: int  # tokens the tier gave
    stored_blocks: int
    loaded_blocks: int
    evicted_blocks: int
    store_bytes: float
    load_bytes: float
    store_s: float
    load_s: float

    @property
    def hit_rate(self) -> float | None:
        return self.external_hits / self.external_queries if self.external_queries else None


@dataclass(frozen=True, slots=True)
class PromptSources:
    """vLLM's prompt tokens by source (cumulative), and its cached / recomputed counters."""

    local_compute: int = 0
    local_cache_hit: int = 0
    external_kv_transfer: int = 0
    cached: int = 0
    recomputed: int = 0

    def add(self, prompt_len: int, num_cached: int, num_external: int) -> PromptSources:
        """One prompt's first token: `num_cached` tokens skipped, `num_external` of them loaded."""
        recomputed = 1 if num_cached + 1 == prompt_len else 0
        return PromptSources(
            self.local_compute + prompt_len - num_cached,
            self.local_cache_hit + num_cached + recomputed - num_external,
            self.external_kv_transfer + num_external,
            self.cached + num_cached,
            self.recomputed + recomputed,
        )


class OffloadTier:
    """An LRU tier of `num_blocks` KV blocks in host memory, keyed by chained block hash."""

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        bytes_per_token: int,
        load_gb_s: float,
        store_gb_s: float | None = None,
    ) -> None:
        if num_blocks < 1:
            raise ValueError(f"an offload tier needs at least 1 block, not {num_blocks}")
        if load_gb_s <= 0 or (store_gb_s is not None and store_gb_s <= 0):
            raise ValueError("offload bandwidths must be positive")
        self.num_blocks = num_blocks
        self.block_bytes = block_size * bytes_per_token
        self.block_size = block_size
        self._load_bps = load_gb_s * 1e9
        self._store_bps = (store_gb_s if store_gb_s is not None else load_gb_s) * 1e9
        self._lru: OrderedDict[int, None] = OrderedDict()  # head = next to evict
        self.external_queries = 0
        self.external_hits = 0
        self.stored_blocks = 0
        self.loaded_blocks = 0
        self.evicted_blocks = 0

    def __contains__(self, block_hash: int) -> bool:
        return block_hash in self._lru

    def store(self, block_hash: int) -> None:
        """Write one computed block through to the tier (a block already held is touched)."""
        if block_hash in self._lru:
            self._lru.move_to_end(block_hash)
            return
        if len(self._lru) >= self.num_blocks:
            self._lru.popitem(last=False)
            self.evicted_blocks += 1
        self._lru[block_hash] = None
        self.stored_blocks += 1

    def match(self, block_hashes: Sequence[int]) -> int:
        """How many of `block_hashes`, from the first, the tier holds (counts nothing)."""
        count = 0
        for block_hash in block_hashes:
            if block_hash not in self._lru:
                break
            count += 1
        return count

    def load(self, block_hashes: Sequence[int], num_queried_tokens: int) -> float:
        """Count one admission's lookup (`num_queried_tokens` asked) and load the blocks it
        hit; gives the load's seconds."""
        self.external_queries += num_queried_tokens
        self.external_hits += len(block_hashes) * self.block_size
        for block_hash in block_hashes:
            self._lru.move_to_end(block_hash)
        self.loaded_blocks += len(block_hashes)
        return len(block_hashes) * self.block_bytes / self._load_bps

    def stats(self) -> OffloadStats:
        store_bytes = float(self.stored_blocks * self.block_bytes)
        load_bytes = float(self.loaded_blocks * self.block_bytes)
        return OffloadStats(
            num_cpu_blocks=self.num_blocks,
            num_used_blocks=len(self._lru),
            external_queries=self.external_queries,
            external_hits=self.external_hits,
            stored_blocks=self.stored_blocks,
            loaded_blocks=self.loaded_blocks,
            evicted_blocks=self.evicted_blocks,
            store_bytes=store_bytes,
            load_bytes=load_bytes,
            store_s=store_bytes / self._store_bps,
            load_s=load_bytes / self._load_bps,
        )


def make_tier(scenario: Scenario, hardware: Hardware) -> OffloadTier | None:
    """The scenario's tier, sized in the GPU's blocks and bytes; None when `cpu_blocks` is 0
    or prefix caching is off (the tier is keyed by the prefix cache's hashes)."""
    offload = scenario.offload
    if offload.cpu_blocks == 0 or not scenario.engine.enable_prefix_caching:
        return None
    return OffloadTier(
        offload.cpu_blocks,
        hardware.block_size,
        hardware.kv_bytes_per_token,
        offload.load_gb_s,
        offload.store_gb_s,
    )
