"""twin.offload: the CPU tier's LRU and load cost, its place in admission, its `/metrics`."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from infertriage.twin.blocks import BlockPool, KVCacheManager
from infertriage.twin.engine import EngineCore, VirtualClock
from infertriage.twin.offload import OffloadTier, PromptSources, make_tier
from infertriage.twin.prom import CacheConfigInfo, VllmMetrics
from infertriage.twin.request import Request, SamplingParams
from infertriage.twin.scenario import load_scenario
from infertriage.twin.scenario_model import OffloadSettings
from infertriage.twin.scheduler import Scheduler, SchedulerConfig

BS = 4  # tokens per block
BYTES_PER_TOKEN = 1000


def make_tier_of(num_blocks: int, load_gb_s: float = 1.0) -> OffloadTier:
    return OffloadTier(num_blocks, BS, BYTES_PER_TOKEN, load_gb_s)


def test_the_tier_is_lru_and_a_restored_block_only_moves_to_the_tail() -> None:
    tier = make_tier_of(3)
    for block_hash in (1, 2, 3):
        tier.store(block_hash)
    tier.store(1)  # already held: touched, not stored again
    tier.store(4)  # full: evicts the least recently used, 2
    assert 2 not in tier and all(h in tier for h in (1, 3, 4))
    stats = tier.stats()
    assert (stats.stored_blocks, stats.evicted_blocks, stats.num_used_blocks) == (4, 1, 3)
    assert stats.store_bytes == 4 * BS * BYTES_PER_TOKEN


def test_match_counts_leading_blocks_only_and_a_load_costs_bytes_over_bandwidth() -> None:
    tier = make_tier_of(8, load_gb_s=2.0)
    for block_hash in (10, 11, 13):
        tier.store(block_hash)
    assert tier.match([10, 11, 12, 13]) == 2  # the chain breaks at 12
    assert tier.match([12, 10]) == 0
    seconds = tier.load([10, 11], num_queried_tokens=16)
    assert seconds == pytest.approx(2 * BS * BYTES_PER_TOKEN / 2e9)
    stats = tier.stats()
    assert (stats.external_queries, stats.external_hits, stats.loaded_blocks) == (16, 8, 2)
    assert stats.hit_rate == pytest.approx(0.5)
    assert stats.load_s == pytest.approx(seconds)


def test_prompt_sources_follow_vllms_prompt_token_stats() -> None:
    sources = PromptSources().add(prompt_len=100, num_cached=40, num_external=24)
    assert (sources.local_compute, sources.local_cache_hit, sources.external_kv_transfer) == (
        60,
        16,
        24,
    )
    # a whole prompt cached: its last token is recomputed, and counted back as a local hit
    sources = sources.add(prompt_len=9, num_cached=8, num_external=0)
    assert sources.recomputed == 1 and sources.local_compute == 61
    assert sources.local_cache_hit == 16 + 9 and sources.cached == 48


def test_no_tier_without_cpu_blocks_or_without_prefix_caching() -> None:
    healthy = load_scenario("healthy")
    engine = EngineCore(healthy, VirtualClock())
    assert make_tier(healthy, engine.hardware) is None
    helps = load_scenario("offload-helps")
    assert make_tier(helps, engine.hardware) is not None
    no_cache = helps.model_copy(
        update={"engine": helps.engine.model_copy(update={"enable_prefix_caching": False})}
    )
    assert make_tier(no_cache, engine.hardware) is None


def _scheduler(num_gpu_blocks: int, tier: OffloadTier) -> Scheduler:
    kv = KVCacheManager(BlockPool(num_gpu_blocks), BS, 256, tier)
    config = SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=256, max_model_len=256)
    return Scheduler(config, kv)


def _run_to_end(scheduler: Scheduler, request: Request) -> float:
    """Step until the request finishes; gives the offload load seconds the steps paid."""
    load_s = 0.0
    while scheduler.has_unfinished_requests():
        output = scheduler.schedule(0.0)
        load_s += output.offload_load_s
        sampled = {i.request.request_id: [5] for i in output.scheduled if i.samples}
        scheduler.update_from_output(output, sampled, 0.0)
    return load_s


def _request(request_id: str, tokens: list[int]) -> Request:
    return Request(request_id, tokens, SamplingParams(max_tokens=1), 0.0, 1, 1, 1000)


def test_a_prefix_the_gpu_evicted_is_loaded_from_the_tier_not_recomputed() -> None:
    tier = make_tier_of(64)
    scheduler = _scheduler(num_gpu_blocks=8, tier=tier)  # 7 usable blocks of 4 tokens
    prefix = list(range(100, 120))  # 5 blocks
    first = _request("a", [*prefix, 1, 2, 3])
    scheduler.add_request(first)
    _run_to_end(scheduler, first)
    assert tier.stats().stored_blocks == 5  # written through as they filled
    filler = _request("b", list(range(500, 525)))  # 7 blocks: evicts all of a's
    scheduler.add_request(filler)
    _run_to_end(scheduler, filler)
    again = _request("c", [*prefix, 7, 8, 9])
    scheduler.add_request(again)
    output = scheduler.schedule(0.0)
    (item,) = output.scheduled
    assert item.num_computed_before == 20 and item.num_new_tokens == 3  # 5 blocks loaded
    assert output.offload_load_s == pytest.approx(5 * BS * BYTES_PER_TOKEN / 1e9)
    scheduler.update_from_output(output, {"c": [5]}, 0.0)
    stats = scheduler.make_stats()
    assert stats.offload is not None and stats.offload.external_hits == 20
    assert stats.prompt_sources.external_kv_transfer == 20
    assert stats.prompt_sources.local_compute == 23 + 25 + 3


def test_a_tier_smaller_than_the_gpu_cache_never_hits() -> None:
    """Write-through: what a small tier still holds, the GPU holds too (offload-thrash)."""
    tier = make_tier_of(4)
    scheduler = _scheduler(num_gpu_blocks=16, tier=tier)
    for index in range(12):
        request = _request(f"r{index}", [index % 3, *range(1000 * index, 1000 * index + 15)])
        scheduler.add_request(request)
        _run_to_end(scheduler, request)
    stats = tier.stats()
    assert stats.external_hits == 0 and stats.stored_blocks >= 36


def test_the_engine_adds_the_load_to_the_step_and_metrics_say_it_as_vllm() -> None:
    scenario = load_scenario("offload-helps")
    small = scenario.model_copy(
        update={
            "engine": scenario.engine.model_copy(update={"num_gpu_blocks_override": 40}),
            "offload": OffloadSettings(cpu_blocks=512, load_gb_s=1.0),
        }
    )
    engine = EngineCore(small, VirtualClock())
    shared = list(range(1, 257))  # 16 blocks
    engine.add_request("a", [*shared, 3], SamplingParams(max_tokens=2), arrival_ts=0.0)
    while engine.has_unfinished_requests():
        engine.step()
    engine.add_request("b", list(range(1000, 1400)), SamplingParams(max_tokens=2))
    while engine.has_unfinished_requests():
        engine.step()
    engine.add_request("c", [*shared, 4], SamplingParams(max_tokens=2))
    loaded = engine.step()
    tier = engine.get_stats().offload
    assert tier is not None and tier.external_hits >= 3 * 16  # what b evicted from the GPU
    per_token = engine.hardware.kv_bytes_per_token
    assert loaded.duration_s - loaded.cost.total_s == pytest.approx(
        tier.external_hits * per_token / 1e9  # over 1 GB/s
    )
    info = CacheConfigInfo(16, engine.num_gpu_blocks, 0.9, True)
    text = VllmMetrics("m", 8192, info, engine.get_stats).render().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    by_source = {
        s.labels["source"]: s.value for s in families["vllm:prompt_tokens_by_source"].samples
    }
    assert set(by_source) == {"local_compute", "local_cache_hit", "external_kv_transfer"}
    assert by_source["external_kv_transfer"] == tier.external_hits
    (hits,) = families["vllm:external_prefix_cache_hits"].samples
    assert hits.value == tier.external_hits and set(hits.labels) == {"model_name", "engine"}
    moved = {
        s.labels["transfer_type"]: s.value for s in families["vllm:kv_offload_total_bytes"].samples
    }
    assert moved["CPU_to_GPU"] == tier.external_hits * per_token
    assert moved["GPU_to_CPU"] > moved["CPU_to_GPU"]


def test_without_a_tier_the_connector_counters_are_zero_and_no_offload_family() -> None:
    engine = EngineCore(load_scenario("healthy"), VirtualClock())
    info = CacheConfigInfo(16, engine.num_gpu_blocks, 0.9, True)
    text = VllmMetrics("m", 8192, info, engine.get_stats).render().decode()
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {"vllm:external_prefix_cache_queries", "vllm:prompt_tokens_by_source"} <= names
    assert not any(name.startswith("vllm:kv_offload") for name in names)
