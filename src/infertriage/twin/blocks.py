"""twin, level 2: the paged KV cache: a block pool with prefix caching, and its manager.

Takes a block count (from `twin.capacity`), a block size and requests; gives
`BlockPool` (blocks, ref counts, the free queue, the hash → block map of cached
full blocks, leak accounting) and `KVCacheManager` (which blocks each request
holds; prefix-cache lookups; `allocate_slots` / `free`), modelled on vLLM V1's
`block_pool.py` and `kv_cache_manager.py`:

- block 0 is the null block, never handed out; usage is over the other blocks;
- a full block's hash chains its parent's: `hash((parent_hash, block_token_ids))`, so
  two requests share a block only when everything before it is equal too;
- freed blocks go to the tail of the free queue and keep their hash: a later request
  can still hit them until `take_new_blocks` evicts them from the head (LRU); a request
  frees its blocks tail first, so its last blocks are evicted first;
- a prefix hit never covers the whole prompt: the last token is always recomputed;
  lookups are counted (tokens asked, tokens hit) once per admission, not per attempt;
- `free(request, num_leaked=k)` keeps `k` blocks referenced for ever (the
  `kv_leak_blocks_per_request` fault) and counts them;
- with a CPU offload tier (`twin.offload`), each newly cached full block is written through
  to it, and `offload_match` gives the blocks after the GPU's hit that the tier holds;
- the blocks a decode run or group fills (`grow_decode`, virtual time only) hold the
  request's own output tokens, which only its own re-admission after a preemption looks up
  (the twin's prompts never repeat its outputs): without an offload tier they are cached
  when the request is preempted (`cache_computed_blocks`), not as they fill, and never when
  it finishes — the same hits, without hashing every output block.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence

from infertriage.twin.offload import OffloadTier
from infertriage.twin.request import Request

__all__ = ["NONE_HASH", "BlockPool", "KVBlock", "KVCacheManager", "hash_block_tokens"]

NONE_HASH = 0x5EED_CAFE  # the parent hash of a sequence's first block


def hash_block_tokens(parent_hash: int, token_ids: Sequence[int]) -> int:
    """The chained hash of one full block (ints hash the same in every process)."""
    return hash((parent_hash, tuple(token_ids)))


class KVBlock:
    """One paged block: its id, how many requests hold it, and its hash once full and cached."""

    __slots__ = ("block_hash", "block_id", "ref_cnt")

    def __init__(self, block_id: int, ref_cnt: int = 0) -> None:
        self.block_id = block_id
        self.ref_cnt = ref_cnt
        self.block_hash: int | None = None

    def __repr__(self) -> str:
        return f"KVBlock({self.block_id}, ref={self.ref_cnt}, hash={self.block_hash})"


class BlockPool:
    """All KV blocks of one GPU: the free queue (LRU order) and the prefix-cache map."""

    def __init__(self, num_gpu_blocks: int, *, enable_caching: bool = True) -> None:
        if num_gpu_blocks < 2:
            raise ValueError(f"a block pool needs at least 2 blocks, not {num_gpu_blocks}")
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        # vLLM's free queue starts as every block in id order and freed blocks join its tail,
        # so its head is the never-used blocks: those are made on first use (`_next_fresh_id`
        # on), and `_free` holds the freed ones, head = next to evict. OrderedDict gives O(1)
        # pop-from-head and removal from the middle.
        self._free: OrderedDict[int, KVBlock] = OrderedDict()
        self._cached: dict[int, KVBlock] = {}
        self.null_block = KVBlock(0)
        self.null_block.ref_cnt = 1
        self._next_fresh_id = 1
        self.num_leaked_blocks = 0
        self.num_evictions = 0

    # ------------------------------------------------------------------ reads
    def get_num_free_blocks(self) -> int:
        """Blocks a new allocation can take, cached-but-unreferenced ones included (as vLLM)."""
        return len(self._free) + self.num_gpu_blocks - self._next_fresh_id

    def get_usage(self) -> float:
        """vLLM's KV-cache usage: 1 − free / (blocks − the null block)."""
        return 1.0 - self.get_num_free_blocks() / (self.num_gpu_blocks - 1)

    def get_cached_block(self, block_hash: int) -> KVBlock | None:
        return self._cached.get(block_hash) if self.enable_caching else None

    @property
    def num_cached_blocks(self) -> int:
        return len(self._cached)

    # ------------------------------------------------------------------ changes
    def take_new_blocks(self, num_blocks: int) -> list[KVBlock]:
        """Pop `num_blocks` from the head of the free queue, evicting their cached hashes."""
        first = self._next_fresh_id
        num_fresh = min(num_blocks, self.num_gpu_blocks - first)
        num_reused = num_blocks - num_fresh
        free = self._free
        if num_reused > len(free):
            num_free = self.get_num_free_blocks()
            raise ValueError(f"cannot take {num_blocks} blocks, {num_free} free")
        taken = (
            [KVBlock(block_id, 1) for block_id in range(first, first + num_fresh)]
            if num_fresh
            else []
        )
        self._next_fresh_id = first + num_fresh
        cached = self._cached
        for _ in range(num_reused):
            block = free.popitem(last=False)[1]
            block_hash = block.block_hash
            if block_hash is not None:
                if cached.get(block_hash) is block:
                    del cached[block_hash]
                block.block_hash = None
                self.num_evictions += 1
            block.ref_cnt = 1
            taken.append(block)
        return taken

    def touch(self, blocks: Iterable[KVBlock]) -> None:
        """A prefix hit: hold the blocks, taking unreferenced ones off the free queue."""
        for block in blocks:
            if block.ref_cnt == 0:
                del self._free[block.block_id]
            block.ref_cnt += 1

    def free_blocks(self, ordered_blocks: Iterable[KVBlock]) -> None:
        """Release blocks in eviction order: each that nobody holds goes to the queue's tail."""
        for block in ordered_blocks:
            block.ref_cnt -= 1
            if block.ref_cnt == 0:
                self._free[block.block_id] = block

    def cache_block(self, block: KVBlock, block_hash: int) -> None:
        """Register a full block under its chained hash (the first block with a hash wins)."""
        self.cache_blocks((block,), (block_hash,))

    def cache_blocks(self, blocks: Iterable[KVBlock], block_hashes: Iterable[int]) -> None:
        """`cache_block` for each block and its hash, in order."""
        if not self.enable_caching:
            return
        register = self._cached.setdefault
        for block, block_hash in zip(blocks, block_hashes, strict=True):
            if block.block_hash is None:
                block.block_hash = block_hash
                register(block_hash, block)

    def leak(self, blocks: Sequence[KVBlock]) -> None:
        """Never return these blocks (they stay referenced); count them."""
        self.num_leaked_blocks += len(blocks)

    def reset_prefix_cache(self) -> None:
        """Forget every cached hash (vLLM's /reset_prefix_cache); held blocks are kept."""
        for block in self._cached.values():
            block.block_hash = None
        self._cached.clear()


class KVCacheManager:
    """Which blocks each request holds; allocation, prefix lookups and their counters."""

    def __init__(
        self,
        pool: BlockPool,
        block_size: int,
        max_model_len: int,
        offload: OffloadTier | None = None,
    ) -> None:
        self.pool = pool
        self.offload = offload
        self.block_size = block_size
        self.max_blocks_per_request = -(-max_model_len // block_size)
        self._blocks: dict[str, list[KVBlock]] = {}
        self._num_cached: dict[str, int] = {}
        # whether `grow_decode` caches the blocks it fills: only for the offload tier's stores
        self.caches_decodes = offload is not None
        self.prefix_cache_queries = 0  # prompt tokens looked up (cumulative)
        self.prefix_cache_hits = 0  # of those, tokens found cached

    @property
    def enable_caching(self) -> bool:
        return self.pool.enable_caching

    def get_blocks(self, request_id: str) -> list[KVBlock]:
        return self._blocks.get(request_id, [])

    def _update_hashes(self, request: Request) -> None:
        hashes = request.block_hashes
        size = self.block_size
        tokens = request.token_ids
        parent = hashes[-1] if hashes else NONE_HASH
        for start in range(len(hashes) * size, len(tokens) - size + 1, size):
            parent = hash_block_tokens(parent, tokens[start : start + size])
            hashes.append(parent)

    def get_computed_blocks(self, request: Request) -> tuple[list[KVBlock], int]:
        """The longest cached prefix of a request about to be admitted: (blocks, tokens).

        Counts nothing: `record_lookup` counts the admission that used it.
        """
        if not self.enable_caching:
            return [], 0
        self._update_hashes(request)
        max_blocks = (request.num_tokens - 1) // self.block_size
        hits: list[KVBlock] = []
        for block_hash in request.block_hashes[:max_blocks]:
            block = self.pool.get_cached_block(block_hash)
            if block is None:
                break
            hits.append(block)
        return hits, len(hits) * self.block_size

    def record_lookup(self, num_tokens: int, num_hit_tokens: int) -> None:
        """Count one admission's prefix lookup (tokens asked, tokens found)."""
        if self.enable_caching:
            self.prefix_cache_queries += num_tokens
            self.prefix_cache_hits += num_hit_tokens

    def allocate_slots(
        self,
        request: Request,
        num_new_tokens: int,
        new_computed_blocks: Sequence[KVBlock] = (),
        num_lookahead_tokens: int = 0,
    ) -> bool:
        """Blocks for `num_new_tokens` (+ lookahead for draft tokens); False when they don't fit.

        On success the prefix hits are held, new blocks appended and newly full blocks cached.
        """
        request_id = request.request_id
        blocks = self._blocks.get(request_id)
        if blocks is None:
            blocks = self._blocks[request_id] = []
        size = self.block_size
        num_computed = request.num_computed_tokens + len(new_computed_blocks) * size
        total = num_computed + num_new_tokens + num_lookahead_tokens
        num_required = min(-(-total // size), self.max_blocks_per_request)
        num_new_blocks = num_required - len(blocks) - len(new_computed_blocks)
        if num_new_blocks > 0 or new_computed_blocks:
            evictable = sum(1 for b in new_computed_blocks if b.ref_cnt == 0)
            if max(num_new_blocks, 0) + evictable > self.pool.get_num_free_blocks():
                return False
            if new_computed_blocks:
                self.pool.touch(new_computed_blocks)
                blocks.extend(new_computed_blocks)
                self._num_cached[request_id] = len(blocks)
            if num_new_blocks > 0:
                blocks.extend(self.pool.take_new_blocks(num_new_blocks))
        if self.pool.enable_caching:
            num_full = min(num_computed + num_new_tokens, request.num_tokens) // size
            if num_full > self._num_cached.get(request_id, 0):
                self._cache_full_blocks(request, num_full)
        return True

    def _cache_full_blocks(self, request: Request, num_full: int) -> None:
        self._update_hashes(request)
        request_id = request.request_id
        first = self._num_cached.get(request_id, 0)
        blocks = self._blocks[request_id][first:num_full]
        hashes = request.block_hashes[first:num_full]
        if self.offload is None:
            self.pool.cache_blocks(blocks, hashes)
        else:  # each stored in the tier as it is cached
            for block, block_hash in zip(blocks, hashes, strict=True):
                self.pool.cache_block(block, block_hash)
                self.offload.store(block_hash)
        self._num_cached[request_id] = num_full

    def offload_match(self, request: Request, num_gpu_hit_blocks: int) -> list[int]:
        """The hashes of the blocks after the GPU's prefix hit that the offload tier holds
        (never the prompt's last token); none without a tier. Counts nothing."""
        if self.offload is None or not self.enable_caching:
            return []
        max_blocks = (request.num_tokens - 1) // self.block_size
        following = request.block_hashes[num_gpu_hit_blocks:max_blocks]
        return following[: self.offload.match(following)]

    def grow(self, request: Request, num_new_tokens: int) -> None:
        """`allocate_slots` for a running request that fits (checked by `num_new_blocks_for`)."""
        blocks = self._blocks[request.request_id]
        size = self.block_size
        num_computed = request.num_computed_tokens
        total = num_computed + num_new_tokens
        num_new_blocks = min(-(-total // size), self.max_blocks_per_request) - len(blocks)
        if num_new_blocks > 0:
            blocks.extend(self.pool.take_new_blocks(num_new_blocks))
        if self.pool.enable_caching:
            num_full = min(total, request.num_tokens) // size
            if num_full > self._num_cached.get(request.request_id, 0):
                self._cache_full_blocks(request, num_full)

    def grow_all(self, requests: Iterable[Request], num_new_tokens: int) -> None:
        """`grow_decode` for each running decode request in turn (whose blocks fit), called
        only for those whose new tokens cross a block boundary (its test, to save the call)."""
        grow, size, fills = self.grow_decode, self.block_size, self.caches_decodes
        for request in requests:
            before = request.num_computed_tokens
            total = before + num_new_tokens
            if (total - 1) // size != (before - 1) // size or (
                fills and total // size != before // size
            ):
                grow(request, total)

    def grow_decode(self, request: Request, total: int, taken_at: list[int] | None = None) -> None:
        """`grow` for a running decode request to `total` computed tokens (blocks that fit),
        caching the blocks it fills only when `caches_decodes`; `taken_at` gets, for each
        block taken, the step of the run (1 for the first) that needs it.

        Only new tokens that cross a block boundary can take a block (or fill one): its
        blocks already cover its computed tokens, and its full ones are cached."""
        before = request.num_computed_tokens
        size = self.block_size
        fills = self.caches_decodes and total // size != before // size
        if (total - 1) // size == (before - 1) // size and not fills:
            return
        request_id, pool = request.request_id, self.pool
        blocks = self._blocks[request_id]
        held = len(blocks)
        num_new_blocks = min(-(-total // size), self.max_blocks_per_request) - held
        if num_new_blocks > 0:
            blocks.extend(pool.take_new_blocks(num_new_blocks))
            if taken_at is not None:  # block b is needed once before + step > b · size
                first = held * size - before + 1
                taken_at.extend(range(first, first + num_new_blocks * size, size))
        if fills and pool.enable_caching:
            num_full = min(total, len(request.token_ids)) // size
            if num_full > self._num_cached.get(request_id, 0):
                self._cache_full_blocks(request, num_full)

    def cache_computed_blocks(self, request: Request) -> None:
        """Cache the full computed blocks of a running request that `grow_decode` left
        uncached, as the single steps would have (before it is preempted: its re-admission
        looks them up). Not for a speculating request: its accepted drafts are computed
        tokens that `allocate_slots` never cached, and caching them here would give its
        re-admission hits the single steps (and vLLM) do not."""
        if self.pool.enable_caching:
            num_full = min(request.num_computed_tokens, request.num_tokens) // self.block_size
            if num_full > self._num_cached.get(request.request_id, 0):
                self._cache_full_blocks(request, num_full)

    def num_new_blocks_for(self, requests: Iterable[Request], num_new_tokens: int) -> int:
        """Blocks that `num_new_tokens` more computed tokens for each request would take."""
        size, cap, blocks_of = self.block_size, self.max_blocks_per_request, self._blocks
        total = 0
        for request in requests:
            needed = -(-(request.num_computed_tokens + num_new_tokens) // size)
            needed = min(needed, cap)
            held = len(blocks_of.get(request.request_id, ()))
            if needed > held:
                total += needed - held
        return total

    def fits(self, requests: Sequence[Request], num_new_tokens: int) -> bool:
        """Whether `num_new_tokens` more computed tokens for each running request fit in the
        free blocks. Each holds blocks for its computed tokens, so each takes at most
        ceil(num_new_tokens / block_size) more: when that many are free, no walk."""
        free = self.pool.get_num_free_blocks()
        if len(requests) * -(-num_new_tokens // self.block_size) <= free:
            return True
        return self.num_new_blocks_for(requests, num_new_tokens) <= free

    def free(self, request: Request, num_leaked: int = 0) -> int:
        """Return a request's blocks, tail first; `num_leaked` of its last blocks are kept.

        Returns how many blocks leaked.
        """
        blocks = self._blocks.pop(request.request_id, [])
        self._num_cached.pop(request.request_id, None)
        leaked = blocks[len(blocks) - min(num_leaked, len(blocks)) :]
        kept = blocks[: len(blocks) - len(leaked)]
        if leaked:
            self.pool.leak(leaked)
        self.pool.free_blocks(reversed(kept))
        return len(leaked)
