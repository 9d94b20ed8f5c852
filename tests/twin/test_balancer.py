"""twin.balancer, twin.disagg's link and the decode admission: routing and transfer rules."""

from __future__ import annotations

import random
from typing import Literal

import pytest

from infertriage.schemas import UserError
from infertriage.twin.balancer import (
    LeastLoaded,
    PrefixAware,
    RankLoad,
    RoundRobin,
    make_balancer,
)
from infertriage.twin.disagg import KvLink
from infertriage.twin.engine import EngineCore, VirtualClock
from infertriage.twin.ranks import mean_counters
from infertriage.twin.request import SamplingParams
from infertriage.twin.scenario import scenario_from_mapping
from infertriage.twin.scenario_model import DisaggregationSettings, Scenario
from infertriage.twin.simulate import simulate

IDLE = RankLoad(running=0, waiting=0)
Policy = Literal["least_loaded", "round_robin", "prefix_aware"]


def test_least_loaded_weighs_waiting_four_times_running() -> None:
    loads = [RankLoad(running=5, waiting=0), RankLoad(running=0, waiting=2)]
    assert LeastLoaded().pick([1, 2, 3], loads) == 0  # 5 < 2 × 4
    assert LeastLoaded().pick([1], [IDLE, IDLE, IDLE]) == 0  # a tie goes to the lowest index


def test_round_robin_ignores_load() -> None:
    balancer = RoundRobin()
    busy = [RankLoad(running=0, waiting=50), IDLE, IDLE]
    assert [balancer.pick([1], busy) for _ in range(5)] == [0, 1, 2, 0, 1]


def test_prefix_aware_keeps_a_prefix_on_its_rank_and_spreads_new_ones() -> None:
    balancer = PrefixAware(num_ranks=2, block_size=4, balance_slack=8)
    group_a = [*range(100, 116), 1, 2]
    group_b = [*range(200, 216), 3]
    first = balancer.pick(group_a, [IDLE, IDLE])
    assert first == 0
    # group b is new: least loaded, now rank 1 since rank 0 carries group a's request
    assert balancer.pick(group_b, [RankLoad(1, 0), IDLE]) == 1
    # group a again, though rank 0 is a little busier: its prefix is cached there
    assert balancer.pick([*group_a[:16], 9, 9], [RankLoad(3, 0), RankLoad(1, 0)]) == 0
    # far busier than the least loaded rank: least loaded wins
    assert balancer.pick(group_a, [RankLoad(8, 6), IDLE]) == 1


def test_prefix_aware_without_a_full_block_is_least_loaded() -> None:
    balancer = PrefixAware(num_ranks=3, block_size=16)
    assert balancer.pick([1, 2, 3], [RankLoad(2, 0), IDLE, RankLoad(1, 0)]) == 1


def test_kv_link_queues_transfers_in_turn() -> None:
    link = KvLink(DisaggregationSettings(link_gb_s=1.0, link_latency_ms=2.0, transfer_setup_ms=1.0))
    one = link.schedule(0.0, 100_000_000)  # 0.1 s of the link
    two = link.schedule(0.0, 100_000_000)  # posted together: waits for the first
    assert one.duration_s == pytest.approx(0.001 + 0.1 + 0.002 - 0.001)
    assert two.done_ts == pytest.approx(0.001 + 0.2 + 0.002)
    assert two.duration_s > one.duration_s
    later = link.schedule(5.0, 1_000_000)  # the link is free again
    assert later.duration_s == pytest.approx(0.001 + 0.002)


def test_decode_admission_does_not_recompute_the_prompt() -> None:
    engine = EngineCore(Scenario(), VirtualClock())
    engine.add_request(
        "r", list(range(1000)), SamplingParams(max_tokens=3), num_computed_tokens=999
    )
    first = engine.step()
    assert first.shape.num_tokens == 1 and first.shape.num_decode_seqs == 1
    assert first.shape.decode_context_sum == 999
    assert [o.request_id for o in first.outputs] == ["r"]
    stats = first.stats
    assert stats.prefix_cache_queries == 0 and stats.num_prefill_tokens == 0
    blocks = engine.kv.get_blocks("r")
    assert len(blocks) == -(-1001 // 16)


def test_scenario_sections_validate_and_simulate_refuses_them() -> None:
    dp = scenario_from_mapping({"data_parallel": {"size": 2, "balancer": "round_robin"}}, "t")
    assert dp.data_parallel.size == 2 and dp.data_parallel.rank_speed is None
    with pytest.raises(UserError, match="rank_speed must list 2 speeds"):
        scenario_from_mapping({"data_parallel": {"size": 2, "rank_speed": [1.0]}}, "t")
    with pytest.raises(UserError, match="cannot be combined"):
        scenario_from_mapping({"data_parallel": {"size": 2}, "disaggregation": {}}, "t")
    with pytest.raises(UserError, match="only the real-time twin runs"):
        simulate(dp, rate=1, num_requests=1)


def test_mean_counters_average_the_engines() -> None:
    engines = [EngineCore(Scenario(), VirtualClock()) for _ in range(2)]
    engines[0].add_request("a", list(range(64)), SamplingParams(max_tokens=1))
    engines[0].step()
    one, idle = (e.get_gpu_counters() for e in engines)
    mean = mean_counters([one, idle])
    assert mean.kernel_s == pytest.approx(one.kernel_s / 2)


def test_waiting_counts_the_requests_the_step_budget_leaves_out() -> None:
    """A prefill instance's queue under long prompts: the next step (decided under async
    scheduling) takes what its token budget holds, and the rest are reported waiting."""
    engine = EngineCore(Scenario(), VirtualClock())
    for index in range(4):
        engine.add_request(f"r{index}", [index + 1] * 6000, SamplingParams(max_tokens=2))
    engine.step()  # r0 whole and a chunk of r1; the next step has room for a chunk of r2
    assert engine.get_stats().num_running_reqs == 2
    assert engine.get_stats().num_waiting_reqs == 1


def _hit_rate(policy: Policy, seed: int = 7) -> float:
    """Requests of 16 prefix groups one at a time through four small-cache engines: the
    share of prompt tokens their prefix caches served."""
    scenario = scenario_from_mapping(
        {"engine": {"num_gpu_blocks_override": 600, "max_model_len": 2048}}, "t"
    )
    engines = [EngineCore(scenario, VirtualClock()) for _ in range(4)]
    balancer = make_balancer(policy, 4, 16)
    rng = random.Random(seed)
    prefixes = [[1000 * group + i for i in range(1024)] for group in range(16)]
    for index in range(240):
        prompt = [*prefixes[rng.randrange(16)], *(rng.randrange(50_000) for _ in range(32))]
        loads = [RankLoad(0, 0)] * 4
        engine = engines[balancer.pick(prompt, loads)]
        engine.add_request(f"r{index}", prompt, SamplingParams(max_tokens=1))
        while engine.has_unfinished_requests():
            engine.step()
    stats = [e.get_stats() for e in engines]
    return sum(s.prefix_cache_hits for s in stats) / sum(s.prefix_cache_queries for s in stats)


def test_prefix_aware_keeps_the_hit_rate_that_round_robin_loses() -> None:
    """dp-prefix-blind's mechanism: 16 groups' prefixes (1,024 blocks) do not fit one rank's
    600 blocks, a quarter of them do."""
    blind, aware = _hit_rate("round_robin"), _hit_rate("prefix_aware")
    assert aware > 0.85
    assert blind < 0.7
    assert _hit_rate("least_loaded") < 0.7  # every rank idle: all on rank 0, which thrashes
