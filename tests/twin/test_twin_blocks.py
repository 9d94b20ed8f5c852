"""twin.blocks: the null block, chained prefix hashes, LRU reuse of freed blocks, leaks."""

from __future__ import annotations

import pytest

from infertriage.twin.blocks import NONE_HASH, BlockPool, KVCacheManager, hash_block_tokens
from infertriage.twin.offload import OffloadTier
from infertriage.twin.request import Request, SamplingParams

BS = 4  # tokens per block in these tests


def make_request(request_id: str, tokens: list[int], max_tokens: int = 8) -> Request:
    return Request(
        request_id, tokens, SamplingParams(max_tokens=max_tokens), 0.0, max_tokens, 1, 1000
    )


def admit(kv: KVCacheManager, request: Request) -> int:
    """Admit as the scheduler does: take the prefix hit, allocate the rest; returns hit tokens."""
    hits, num_hit = kv.get_computed_blocks(request)
    assert kv.allocate_slots(request, request.num_tokens - num_hit, hits)
    kv.record_lookup(request.num_tokens, num_hit)
    request.num_computed_tokens = request.num_tokens
    return num_hit


def test_block_zero_is_the_null_block_and_never_handed_out() -> None:
    pool = BlockPool(10)
    assert pool.null_block.block_id == 0 and pool.null_block.ref_cnt == 1
    assert pool.get_num_free_blocks() == 9 and pool.get_usage() == 0.0
    taken = pool.take_new_blocks(9)
    assert sorted(b.block_id for b in taken) == list(range(1, 10))
    assert pool.get_usage() == 1.0
    with pytest.raises(ValueError, match="cannot take"):
        pool.take_new_blocks(1)


def test_shared_prefix_hits_only_full_blocks_with_equal_parents() -> None:
    kv = KVCacheManager(BlockPool(32), BS, 64)
    shared = [1, 2, 3, 4, 5, 6, 7, 8]
    a = make_request("a", [*shared, 9, 9, 9])
    b = make_request("b", [*shared, 7, 7, 7, 7, 1])
    assert admit(kv, a) == 0
    assert admit(kv, b) == 8  # the two shared blocks
    assert [blk.block_id for blk in kv.get_blocks("b")[:2]] == [
        blk.block_id for blk in kv.get_blocks("a")[:2]
    ]
    assert kv.get_blocks("a")[0].ref_cnt == 2
    # Same second block, different first block: the chained hash differs, so no hit at all.
    c = make_request("c", [9, 9, 9, 9, 5, 6, 7, 8, 1])
    assert admit(kv, c) == 0
    assert kv.prefix_cache_hits == 8
    assert kv.prefix_cache_queries == a.num_tokens + b.num_tokens + c.num_tokens


def test_chained_hash_depends_on_the_parent() -> None:
    assert hash_block_tokens(NONE_HASH, [1, 2]) != hash_block_tokens(123, [1, 2])
    assert hash_block_tokens(NONE_HASH, [1, 2]) == hash_block_tokens(NONE_HASH, (1, 2))


def test_the_last_prompt_token_is_always_recomputed() -> None:
    kv = KVCacheManager(BlockPool(32), BS, 64)
    tokens = list(range(8))  # exactly two full blocks
    first = make_request("first", tokens)
    admit(kv, first)
    kv.free(first)
    again = make_request("again", tokens)
    assert admit(kv, again) == 4  # one block: (8 - 1) // 4


def test_freed_cached_blocks_are_hit_again_until_evicted_lru() -> None:
    pool = BlockPool(9)  # blocks 1..8 usable
    kv = KVCacheManager(pool, BS, 64)
    prefix = list(range(100, 112))  # three full blocks
    a = make_request("a", [*prefix, 0])
    admit(kv, a)
    assert [blk.block_id for blk in kv.get_blocks("a")] == [1, 2, 3, 4]
    kv.free(a)
    assert pool.get_num_free_blocks() == 8  # freed blocks count as free, and stay cached
    b = make_request("b", [*prefix, 1])
    assert admit(kv, b) == 12  # the three full blocks come back off the free queue
    assert [blk.block_id for blk in kv.get_blocks("b")] == [1, 2, 3, 5]
    kv.free(b)
    # Free queue now: never-used 6, 7, 8, a's partial 4, then b's blocks tail first: 5, 3, 2, 1.
    assert [blk.block_id for blk in pool.take_new_blocks(5)] == [6, 7, 8, 4, 5]
    assert pool.num_evictions == 0  # nothing cached was needed yet
    assert [blk.block_id for blk in pool.take_new_blocks(1)] == [3]
    assert pool.num_evictions == 1
    assert kv.get_computed_blocks(make_request("c", [*prefix, 2]))[1] == 8  # blocks 1 and 2


def test_lru_evicts_a_requests_last_block_first() -> None:
    pool = BlockPool(5)  # 4 usable
    kv = KVCacheManager(pool, BS, 64)
    a = make_request("a", [*range(12), 99])  # blocks: full, full, full, partial
    admit(kv, a)
    ids = [b.block_id for b in kv.get_blocks("a")]
    kv.free(a)
    first_out = pool.take_new_blocks(1)[0]
    assert first_out.block_id == ids[-1]  # the tail goes first
    second_out = pool.take_new_blocks(1)[0]
    assert second_out.block_id == ids[2]
    # The first two blocks survive: a request with the same prefix still hits them.
    assert kv.get_computed_blocks(make_request("b", [*range(12), 5]))[1] == 8


def test_a_block_held_by_two_requests_is_free_only_when_both_let_go() -> None:
    kv = KVCacheManager(BlockPool(16), BS, 64)
    a = make_request("a", [1, 2, 3, 4, 5])
    b = make_request("b", [1, 2, 3, 4, 6])
    admit(kv, a)
    admit(kv, b)
    shared = kv.get_blocks("a")[0]
    kv.free(a)
    assert shared.ref_cnt == 1 and kv.pool.get_num_free_blocks() == 15 - 2
    kv.free(b)
    assert shared.ref_cnt == 0 and kv.pool.get_num_free_blocks() == 15


def test_leaked_blocks_are_never_returned_and_are_counted() -> None:
    pool = BlockPool(20)
    kv = KVCacheManager(pool, BS, 64)
    for index in range(3):
        request = make_request(f"r{index}", [index] * 10)  # 3 blocks each
        admit(kv, request)
        assert kv.free(request, num_leaked=2) == 2
        assert pool.get_num_free_blocks() == 19 - 2 * (index + 1)
    assert pool.num_leaked_blocks == 6
    small = make_request("small", [7])  # one block, asked to leak two
    admit(kv, small)
    assert kv.free(small, num_leaked=2) == 1
    assert pool.num_leaked_blocks == 7


def test_allocation_fails_cleanly_when_blocks_run_out() -> None:
    pool = BlockPool(4)  # 3 usable
    kv = KVCacheManager(pool, BS, 64)
    big = make_request("big", list(range(13)))  # needs 4 blocks
    assert not kv.allocate_slots(big, 13)
    assert pool.get_num_free_blocks() == 3 and kv.get_blocks("big") == []


def test_a_decodes_filled_blocks_are_cached_at_preemption_not_as_they_fill() -> None:
    # Without an offload tier, `grow_decode` (decode runs, virtual time) takes blocks but does
    # not hash the blocks it fills; `cache_computed_blocks` (before a preemption) caches what
    # the single steps would have, so the re-admitted request hits its own output blocks.
    kv = KVCacheManager(BlockPool(32), BS, 64)
    request = make_request("a", [1, 2, 3, 4, 5])  # one full prompt block, cached at admission
    admit(kv, request)
    request.token_ids.extend(request.next_output_tokens(7))  # 12 tokens: three full blocks
    kv.grow_decode(request, 11)
    request.num_computed_tokens = 11
    assert len(kv.get_blocks("a")) == 3 and kv.pool.num_cached_blocks == 1
    kv.cache_computed_blocks(request)
    assert kv.pool.num_cached_blocks == 2  # blocks of computed tokens only: 11 // 4
    kv.free(request)
    request.num_computed_tokens = 0
    hits, num_hit = kv.get_computed_blocks(request)
    assert num_hit == 8 and len(hits) == 2


def test_with_an_offload_tier_a_decodes_blocks_are_cached_as_they_fill() -> None:
    tier = OffloadTier(64, BS, bytes_per_token=128, load_gb_s=10.0)
    kv = KVCacheManager(BlockPool(32), BS, 64, tier)
    request = make_request("a", [1, 2, 3, 4, 5])
    admit(kv, request)
    request.token_ids.extend(request.next_output_tokens(7))
    kv.grow_decode(request, 11)
    assert kv.pool.num_cached_blocks == 2 and tier.stored_blocks == 2
