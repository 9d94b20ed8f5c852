"""Every rule threshold in `Thresholds`, tested at the threshold: 5 % inside fires, 5 % outside
is quiet, so a threshold moved by 10 % breaks a test; and the evidence shows the threshold the
rule applied. (launch_gap_fraction, launch_gap_roofline_share, prefill_ttft_share and
prompt_steps are tested this way in test_rules.py; budget_prompt_fit and budget_load in
test_budget_throughput.py.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from infertriage.diagnose import RULES, Evidence
from infertriage.schemas import Status, Thresholds

from .evidence_helpers import DP_EVEN, PD_HEALTHY, make_evidence

SLOW_ITL = {"client__itl_p95_s": 0.12}
_NO_TTFT: dict[str, float | None] = {
    "client__ttft_p95_s": None,
    "server__ttft_p95_s": None,
    "client__num_requests": None,
}


@dataclass(frozen=True)
class At:
    rule: str
    evidence: Callable[[float], Evidence]  # the evidence with the threshold's signal at v
    below_fires: bool = False  # the rule fires below the threshold, not above it
    kind: str = "fires"  # or "bottleneck" (status flips), "full" (severity reaches 1)
    shown: str | None = None  # the signal whose evidence carries the threshold itself


def _ev(**fixed: float | None) -> Callable[[str], Callable[[float], Evidence]]:
    """`_ev(**fixed)(name)`: evidence with `fixed` and the signal `name` at the value."""
    return lambda name: lambda v: make_evidence(**{**fixed, name: v})


# a tier that found 1 % of 100,000 tokens asked
_OFFLOAD = {"offload__tier": 1.0, "offload__hit_share": 0.01, "offload__external_queries": 1e5}

# every decode line eager, the ITL SLO missed, no trace to judge it
_EAGER_MISSED = {
    "log__eager_decode_share": 1.0,
    "client__itl_p95_s": 0.12,
    "trace__cuda_graph_fraction": None,
}

# a field that two rules read has a case for each
CASES: dict[str, At | tuple[At, ...]] = {
    # memory: a KV offload tier
    "offload_hit_share": At(
        "memory.offload_not_paying",
        _ev(**_OFFLOAD)("offload__hit_share"),
        below_fires=True,
        shown="offload.hit_share",
    ),
    "offload_min_queries": At(
        "memory.offload_not_paying",
        _ev(**_OFFLOAD)("offload__external_queries"),
        shown="offload.external_queries",
    ),
    "offload_load_vs_recompute": At(
        "memory.offload_not_paying",
        lambda v: make_evidence(
            **{**_OFFLOAD, "offload__hit_share": 0.5, "offload__loaded_tokens": 1e5},
            offload__recompute_s_per_token=1e-4,
            offload__load_s_per_token=v * 1e-4,
        ),
    ),
    "offload_tier_full": At(
        "memory.offload_not_paying",
        _ev(**_OFFLOAD)("offload__host_usage_max"),
        kind="full",
        shown="offload.host_usage_max",
    ),
    # kernel
    "host_wait_fraction": At(
        "kernel.host_wait", _ev()("trace__host_wait_fraction"), shown="trace.host_wait_fraction"
    ),
    "syncs_per_step": At(
        "kernel.sync_every_step", _ev()("trace__syncs_per_step"), shown="trace.syncs_per_step"
    ),
    "short_kernel_fraction": At(
        "kernel.short_kernels",
        _ev(trace__cuda_graph_fraction=0.0, trace__gpu_idle_fraction=0.4)(
            "trace__short_kernel_fraction"
        ),
        shown="trace.short_kernel_fraction",
    ),
    "cuda_graph_fraction_on": At(
        "kernel.launch_bound",
        _ev(trace__launch_gap_fraction=0.3, config__cuda_graphs=None)("trace__cuda_graph_fraction"),
        below_fires=True,
        shown="trace.cuda_graph_fraction",
    ),
    "recompilations": At(
        "kernel.recompilations", _ev()("trace__recompilations"), shown="trace.recompilations"
    ),
    "recompilations_full": At("kernel.recompilations", _ev()("trace__recompilations"), kind="full"),
    # application
    "client_ttft_gap_s": At(
        "application.client_vs_server_ttft",
        lambda v: make_evidence(
            server__ttft_p50_s=0.01, server__ttft_p95_s=None, client__ttft_p50_s=0.01 + v
        ),
    ),
    "frontend_thread_busy": At(
        "application.frontend_saturated",
        _ev()("proc__frontend_thread_cpu"),
        shown="proc.frontend_thread_cpu",
    ),
    "frontend_token_cost_s": At(
        "application.frontend_per_token",
        _ev(client__throughput_tok_s=1e5)("proc__frontend_cpu_per_token_s"),
        shown="proc.frontend_cpu_per_token_s",
    ),
    "frontend_token_share": At(
        "application.frontend_per_token",
        lambda v: make_evidence(
            proc__frontend_cpu_per_token_s=1e-3, client__throughput_tok_s=v * 1e3
        ),
    ),
    "frontend_busy_apart": At(
        "application.frontend_per_token",
        lambda v: make_evidence(
            proc__frontend_cpu_per_token_s=1e-3,
            client__throughput_tok_s=1e3,
            proc__engine_apart=1,
            proc__frontend_thread_cpu=v,
        ),
    ),
    "client_itl_over_server": At(
        "application.buffering_proxy",
        lambda v: make_evidence(server__itl_p95_s=0.02, client__itl_p95_s=v * 0.02),
    ),
    "stream_cut_fraction": At(
        "application.stream_cut",
        _ev(client__stream_cut_at_s=2.0)("client__stream_cut_fraction"),
        shown="client.stream_cut_fraction",
    ),
    "replica_imbalance": At(
        "application.replica_imbalance",
        _ev(fleet__replicas=4, fleet__busiest_excess=3.0)("fleet__imbalance"),
        shown="fleet.imbalance",
    ),
    "error_rate_full": At(
        "application.admission_control", _ev()("client__admission_rate"), kind="full"
    ),
    # hardware
    "hbm_min_decode_batch": At(
        "hardware.hbm_bandwidth_bound",
        _ev(gpu__dram_active_mean=0.85, **SLOW_ITL)("queue__running_max"),
    ),
    "slo_headroom": At(
        "hardware.hbm_bandwidth_bound",
        lambda v: make_evidence(
            gpu__dram_active_mean=0.85, client__itl_p95_s=v * Thresholds().itl_p95_s
        ),
    ),
    "roofline_efficiency": At(
        "hardware.below_roofline",
        lambda v: make_evidence(client__throughput_tok_s=v * 4000.0),
        below_fires=True,
    ),
    "pcie_saturated": At(
        "hardware.pcie_saturated", _ev()("gpu__pcie_utilization"), shown="gpu.pcie_utilization"
    ),
    "pageable_fraction": At(
        "hardware.pageable_memcpy",
        _ev(trace__memcpy_fraction=0.2)("trace__memcpy__pageable_fraction"),
        shown="trace.memcpy.pageable_fraction",
    ),
    "min_memcpy_fraction": At(
        "hardware.pageable_memcpy",
        _ev(trace__memcpy__pageable_fraction=1.0)("trace__memcpy_fraction"),
        shown="trace.memcpy_fraction",
    ),
    # memory
    "kv_full": At(
        "memory.kv_pressure", _ev(preemptions__total=12)("kv__usage_max"), shown="kv.usage_max"
    ),
    "kv_drain_residue": At(
        "memory.kv_leak",
        _ev(kv__usage_max=0.9)("kv__usage_after_drain"),
        shown="kv.usage_after_drain",
    ),
    "kv_leak_of_peak": At(
        "memory.kv_leak",
        lambda v: make_evidence(kv__usage_after_drain=0.01, kv__usage_max=0.01 / v),
    ),
    "kv_leak_floor": At(
        "memory.kv_leak",
        lambda v: make_evidence(kv__usage_after_drain=v, kv__usage_max=v / 0.9),
    ),
    "kv_usage_rounding": At(
        "memory.headroom",
        lambda v: make_evidence(gpu__fb_used_fraction=1 - (Thresholds().gpu_memory_headroom - v)),
    ),
    "prefix_hit_share": At(
        "memory.prefix_cache_low",
        lambda v: make_evidence(workload__prefix_reuse=0.4, prefix_cache__hit_rate=v * 0.4),
        below_fires=True,
    ),
    "plan_slack": At(
        "memory.longer_than_plan",
        lambda v: make_evidence(client__mean_prompt_tokens=v * 800.0),
    ),
    # parallelism
    "comm_share": At(
        "parallelism.communication_share",
        _ev()("trace__nccl_fraction"),
        shown="trace.nccl_fraction",
    ),
    "comm_bound": At(
        "parallelism.communication_share", _ev()("trace__nccl_fraction"), kind="bottleneck"
    ),
    "poor_overlap": At(
        "parallelism.poor_overlap",
        _ev(trace__nccl_fraction=0.2)("trace__comm_overlap_fraction"),
        below_fires=True,
        shown="trace.comm_overlap_fraction",
    ),
    "min_comm_share": At(
        "parallelism.poor_overlap",
        _ev(trace__comm_overlap_fraction=0.05)("trace__nccl_fraction"),
        shown="trace.nccl_fraction",
    ),
    "rank_skew": At(
        "parallelism.rank_skew",
        _ev()("trace__rank_skew_fraction"),
        shown="trace.rank_skew_fraction",
    ),
    "dp_imbalance": At(
        "parallelism.dp_rank_imbalance",
        _ev(**{**DP_EVEN, "dp__busiest_running": 40, "dp__idlest_running": 10})("dp__imbalance"),
        shown="dp.imbalance",
    ),
    "min_excess_requests": (
        # two ranks at 2v and 0 requests: the busiest carries v more than the mean rank
        At(
            "parallelism.dp_rank_imbalance",
            lambda v: make_evidence(
                **{
                    **DP_EVEN,
                    "dp__imbalance": 2.0,
                    "dp__idlest_running": 0.0,
                    "dp__busiest_running": 2 * v,
                }
            ),
        ),
        At(
            "application.replica_imbalance",
            _ev(fleet__replicas=4, fleet__imbalance=2.0)("fleet__busiest_excess"),
            shown="fleet.busiest_excess",
        ),
    ),
    "routing_chance_max": At(
        "application.replica_imbalance",
        _ev(
            fleet__replicas=4,
            fleet__imbalance=2.0,
            fleet__busiest_excess=0.5,
            fleet__request_imbalance=2.0,
        )("fleet__routing_chance"),
        below_fires=True,
        shown="fleet.routing_chance",
    ),
    "dp_busy_batch": At(
        "parallelism.dp_rank_imbalance",
        _ev(**{**DP_EVEN, "dp__imbalance": 2.0, "dp__idlest_running": 0})("dp__busiest_running"),
        kind="bottleneck",
        shown="dp.busiest_running",
    ),
    # prefill/decode disaggregation and prefix affinity (diagnose.rules.disagg)
    "pd_transfer_share": At(
        "parallelism.kv_transfer_bound",
        _ev(**PD_HEALTHY)("pd__transfer_ttft_share"),
        shown="pd.transfer_ttft_share",
    ),
    "pd_transfer_bound": At(
        "parallelism.kv_transfer_bound",
        _ev(**PD_HEALTHY)("pd__transfer_ttft_share"),
        kind="bottleneck",
    ),
    "pd_slow_link_bytes_s": At(
        "parallelism.kv_transfer_bound",
        _ev(**{**PD_HEALTHY, "pd__transfer_ttft_share": 0.2})("pd__transfer_bytes_per_s"),
        below_fires=True,
        shown="pd.transfer_bytes_per_s",
    ),
    "pd_link_share": At(
        "parallelism.kv_transfer_bound",
        _ev(**{**PD_HEALTHY, "pd__transfer_bytes_per_s": 1e9})("pd__transfer_ttft_share"),
    ),
    "pd_transfer_failures": At(
        "parallelism.kv_transfer_bound",
        _ev(**PD_HEALTHY)("pd__transfer_failure_share"),
        shown="pd.transfer_failure_share",
    ),
    "pd_transfer_queue": At(  # per decode instance: PD_HEALTHY has two
        "parallelism.kv_transfer_bound",
        lambda v: make_evidence(**PD_HEALTHY, pd__transfer_queue=2 * v),
        shown="pd.transfer_queue",
    ),
    "pd_pool_queue": At(
        "parallelism.pd_ratio_mismatch",
        _ev(**{**PD_HEALTHY, "pd__decode_kv_usage": 0.08})("pd__prefill_waiting_per_instance"),
        shown="pd.prefill_waiting_per_instance",
    ),
    "pd_pool_room": At(
        "parallelism.pd_ratio_mismatch",
        _ev(**{**PD_HEALTHY, "pd__prefill_waiting_per_instance": 40})("pd__decode_kv_usage"),
        below_fires=True,
        shown="pd.decode_kv_usage",
    ),
    "pd_idle_running": At(
        "parallelism.pd_ratio_mismatch",
        _ev(
            **{
                **PD_HEALTHY,
                "pd__decode_waiting_per_instance": 30,
                "pd__decode_kv_usage": 0.9,
                "pd__prefill_kv_usage": 0.02,
            }
        )("pd__prefill_running_per_instance"),
        below_fires=True,
        shown="pd.prefill_running_per_instance",
    ),
    "prefix_affinity_ratio": At(  # hits at v × the reuse the client sent (60 %)
        "parallelism.prefix_affinity_lost",
        lambda v: make_evidence(
            **DP_EVEN, workload__prefix_reuse=0.6, prefix_cache__hit_rate=0.6 * v
        ),
        below_fires=True,
    ),
    "prefix_min_reuse": At(
        "parallelism.prefix_affinity_lost",
        _ev(**{**DP_EVEN, "prefix_cache__hit_rate": 0.01})("workload__prefix_reuse"),
        shown="workload.prefix_reuse",
    ),
    "prefix_spread": At(
        "parallelism.prefix_affinity_lost",
        _ev(**DP_EVEN)("dp__prefix_hit_rate_spread"),
        shown="dp.prefix_hit_rate_spread",
    ),
    # the prompts the reuse counts (a light load: a closed loop of one stream, two ranks)
    "prefix_min_prompts": (
        At(
            "memory.prefix_cache_low",
            _ev(workload__prefix_reuse=0.98, prefix_cache__hit_rate=0.0)("workload__prompts"),
            shown="workload.prompts",
        ),
        At(
            "parallelism.prefix_affinity_lost",
            _ev(**DP_EVEN, workload__prefix_reuse=0.98, prefix_cache__hit_rate=0.01)(
                "workload__prompts"
            ),
            shown="workload.prompts",
        ),
        At(
            "parallelism.prefix_affinity_lost",
            _ev(**DP_EVEN, dp__prefix_hit_rate_spread=0.6)("workload__prompts"),
        ),
    ),
    # expert and pipeline parallelism
    "ep_hot_rank": At(
        "parallelism.expert_imbalance", _ev()("ep__hot_rank_ratio"), shown="ep.hot_rank_ratio"
    ),
    "ep_hot_rank_bound": At(
        "parallelism.expert_imbalance", _ev()("ep__hot_rank_ratio"), kind="bottleneck"
    ),
    "pp_stage_imbalance": At(
        "parallelism.pipeline_bubble",
        lambda v: make_evidence(
            config__pipeline_parallel=4,
            gpu__busy_by_gpu_mean=0.5,
            gpu__busy_by_gpu_max=0.5 * v,
            pp__requests_in_flight=1,
        ),
    ),
    "pp_busy_stage": At(
        "parallelism.pipeline_bubble",
        lambda v: make_evidence(
            config__pipeline_parallel=4,
            gpu__busy_by_gpu_mean=v / 2,
            gpu__busy_by_gpu_max=v,
            pp__requests_in_flight=1,
        ),
        shown="gpu.busy_by_gpu_max",
    ),
    "pp_bubble_busy": At(
        "parallelism.pipeline_bubble",
        lambda v: make_evidence(
            config__pipeline_parallel=4,
            gpu__busy_by_gpu_mean=v,
            gpu__busy_by_gpu_max=v,
            pp__requests_in_flight=16,
        ),
        below_fires=True,
        shown="gpu.busy_by_gpu_mean",
    ),
    "scaling_of_plan": At(
        "parallelism.scaling_below_plan",
        lambda v: make_evidence(scaling__efficiency=v * 0.9, scaling__plan_efficiency=0.9),
        below_fires=True,
    ),
    "scaling_no_plan": At(
        "parallelism.scaling_below_plan",
        _ev(scaling__plan_efficiency=None)("scaling__efficiency"),
        below_fires=True,
        shown="scaling.efficiency",
    ),
    # scheduling
    "queue_share": At(
        "scheduling.queue_dominates_ttft",
        lambda v: make_evidence(server__queue_time_mean_s=v * 0.8, server__ttft_mean_s=0.8),
    ),
    "kv_room": At(
        "scheduling.queue_dominates_ttft",
        _ev(server__queue_time_mean_s=0.6, server__ttft_mean_s=0.8)("kv__usage_max"),
        below_fires=True,
        shown="kv.usage_max",
    ),
    "engine_thread_busy": At(
        "scheduling.engine_loop_cpu",
        _ev()("proc__engine_thread_cpu"),
        shown="proc.engine_thread_cpu",
    ),
    "step_cpu_gap": At(
        "scheduling.step_cpu_gap",
        _ev()("trace__step_cpu_gap_fraction"),
        shown="trace.step_cpu_gap_fraction",
    ),
    "unbounded_slope": At(
        "scheduling.unbounded_queue",
        _ev(queue__waiting_max=3)("queue__waiting_slope"),
        shown="queue.waiting_slope",
    ),
    "queued_for_minutes": At(
        "scheduling.unbounded_queue",
        _ev(queue__waiting_slope=5)("queue__waiting_max"),
        kind="bottleneck",
        shown="queue.waiting_max",
    ),
    # 100 requests/s measured (10,000 tokens/s of 100 each): v seconds of queue
    "queued_for_s": At(
        "scheduling.unbounded_queue",
        lambda v: make_evidence(
            queue__waiting_slope=5,
            queue__waiting_max=v * 100,
            client__throughput_tok_s=10_000.0,
            client__mean_output_tokens=100.0,
        ),
        kind="bottleneck",
    ),
    # speculative
    "low_acceptance": At(
        "speculative.low_acceptance",
        _ev()("spec__acceptance_rate"),
        below_fires=True,
        shown="spec.acceptance_rate",
    ),
    "not_worth_it": At(
        "speculative.low_acceptance",
        _ev()("spec__acceptance_rate"),
        below_fires=True,
        kind="bottleneck",
    ),
    "acceptance_decay": At(
        "speculative.acceptance_decay",
        _ev()("spec__acceptance_decay"),
        below_fires=True,
        shown="spec.acceptance_decay",
    ),
    # a server's log
    "engine_stuck_s": At(
        "scheduling.engine_stuck", _ev()("log__engine_stuck_s"), shown="log.engine_stuck_s"
    ),
    "engine_stuck_full_s": At("scheduling.engine_stuck", _ev()("log__engine_stuck_s"), kind="full"),
    "cache_miss_share": At(
        "memory.prompt_reprocessed",
        _ev(log__cache_misses=5)("log__cache_miss_share"),
        kind="bottleneck",
        shown="log.cache_miss_share",
    ),
    "eager_decode_share": At(
        "kernel.eager_decode", _ev()("log__eager_decode_share"), shown="log.eager_decode_share"
    ),
    # short eager steps, enough of them, make it a bottleneck when the ITL SLO is missed and
    # no trace judges it
    "eager_decode_step_s": At(
        "kernel.eager_decode",
        _ev(**_EAGER_MISSED, log__eager_decode_lines=10)("log__eager_decode_step_s"),
        below_fires=True,
        kind="bottleneck",
        shown="log.eager_decode_step_s",
    ),
    "eager_decode_min_lines": At(
        "kernel.eager_decode",
        _ev(**_EAGER_MISSED, log__eager_decode_step_s=0.01)("log__eager_decode_lines"),
        kind="bottleneck",
        shown="log.eager_decode_lines",
    ),
    "prefill_only_share": At(
        "scheduling.prefill_blocks_decode",
        _ev()("log__prefill_only_share"),
        shown="log.prefill_only_share",
    ),
    "client_aborts": At("application.client_aborts", _ev()("log__aborted"), shown="log.aborted"),
    "kv_transfer_share": At(
        "parallelism.kv_transfer",
        lambda v: make_evidence(pd__kv_transfer_p95_s=v * 0.2),  # the TTFT SLO: 200 ms
    ),
    # no TTFT measured: the queue in the evidence is the symptom (every seat taken here)
    "queue_symptom_depth": At(
        "scheduling.queue_dominates_ttft",
        _ev(**_NO_TTFT, queue__running_max=8, config__max_num_seqs=8, queue__waiting_share=1.0)(
            "queue__waiting_max"
        ),
        kind="bottleneck",
    ),
    "queue_symptom_share": At(
        "scheduling.queue_dominates_ttft",
        _ev(**_NO_TTFT, queue__running_max=8, config__max_num_seqs=8, queue__waiting_max=12)(
            "queue__waiting_share"
        ),
        kind="bottleneck",
    ),
}


# the thresholds' values, pinned: a default moved by 10 % fails here
PINNED: dict[str, float] = {
    "offload_hit_share": 0.05,
    "offload_min_queries": 10_000.0,
    "offload_load_vs_recompute": 1.0,
    "offload_tier_full": 0.98,
    "acceptance_decay": 0.3,
    "client_itl_over_server": 3.0,
    "client_ttft_gap_s": 0.05,
    "comm_bound": 0.45,
    "comm_share": 0.3,
    "cuda_graph_fraction_on": 0.5,
    "eager_decode_share": 0.5,
    "eager_decode_step_s": 0.025,
    "eager_decode_min_lines": 3.0,
    "engine_stuck_full_s": 300.0,
    "engine_stuck_s": 60.0,
    "engine_thread_busy": 0.95,
    "error_rate_full": 0.1,
    "frontend_busy_apart": 0.7,
    "frontend_thread_busy": 0.8,
    "frontend_token_cost_s": 150e-6,
    "frontend_token_share": 0.2,
    "hbm_min_decode_batch": 8.0,
    "host_wait_fraction": 0.3,
    "kv_drain_residue": 0.02,
    "kv_full": 0.95,
    "kv_leak_floor": 0.002,
    "kv_leak_of_peak": 0.5,
    "kv_room": 0.9,
    "kv_usage_rounding": 0.005,
    "low_acceptance": 0.5,
    "min_comm_share": 0.1,
    "min_memcpy_fraction": 0.01,
    "not_worth_it": 0.3,
    "pageable_fraction": 0.5,
    "pcie_saturated": 0.8,
    "plan_slack": 1.2,
    "poor_overlap": 0.2,
    "prefix_hit_share": 0.5,
    "queue_share": 0.5,
    "queued_for_minutes": 1000.0,
    "queued_for_s": 60.0,
    "queue_symptom_depth": 4.0,
    "cache_miss_share": 0.25,
    "kv_transfer_share": 0.5,
    "prefill_only_share": 0.3,
    "client_aborts": 3.0,
    "queue_symptom_share": 0.5,
    "rank_skew": 0.1,
    "dp_imbalance": 1.5,
    "dp_busy_batch": 8.0,
    "min_excess_requests": 1.0,
    "pd_transfer_share": 0.3,
    "pd_transfer_bound": 0.5,
    "pd_slow_link_bytes_s": 2e9,
    "pd_link_share": 0.1,
    "pd_transfer_failures": 0.01,
    "pd_transfer_queue": 8.0,
    "pd_pool_queue": 4.0,
    "pd_pool_room": 0.5,
    "pd_idle_running": 1.0,
    "prefix_affinity_ratio": 0.5,
    "prefix_min_reuse": 0.2,
    "prefix_spread": 0.3,
    "prefix_min_prompts": 10.0,
    "ep_hot_rank": 1.25,
    "ep_hot_rank_bound": 2.0,
    "pp_stage_imbalance": 1.3,
    "pp_busy_stage": 0.5,
    "pp_bubble_busy": 0.35,
    "recompilations": 1.0,
    "recompilations_full": 8.0,
    "replica_imbalance": 1.5,
    "routing_chance_max": 0.01,
    "roofline_efficiency": 0.5,
    "scaling_no_plan": 0.7,
    "scaling_of_plan": 0.8,
    "short_kernel_fraction": 0.5,
    "slo_headroom": 0.8,
    "step_cpu_gap": 0.3,
    "stream_cut_fraction": 0.05,
    "syncs_per_step": 2.0,
    "unbounded_slope": 0.5,
}


def _at(threshold: float, inside: bool, below_fires: bool = False) -> float:
    return threshold * (1.05 if inside != below_fires else 0.95)


def _check(field: str, t: Thresholds, value: float, inside: bool) -> None:
    cases = CASES[field]
    for case in cases if isinstance(cases, tuple) else (cases,):
        _check_case(case, field, t, value, inside)


def _check_case(case: At, field: str, t: Thresholds, value: float, inside: bool) -> None:
    finding = RULES[case.rule].fn(case.evidence(value), t)
    if case.kind == "fires":
        assert (finding is not None) is inside, field
    elif case.kind == "bottleneck":
        assert finding is not None, field
        assert (finding.status is Status.BOTTLENECK) is inside, field
    else:
        assert finding is not None, field
        assert (finding.severity == 1.0) is inside, field
    if finding is not None and case.shown is not None:
        shown = {e.signal: e.threshold for e in finding.evidence}
        assert shown[case.shown] == pytest.approx(getattr(t, field)), field


@pytest.mark.parametrize("inside", [True, False], ids=["inside", "outside"])
@pytest.mark.parametrize("field", sorted(CASES))
def test_rule_at_its_threshold(field: str, inside: bool) -> None:
    """5 % inside the pinned value fires, 5 % outside is quiet; and the rule reads the field:
    moved 20 % away, the value that was inside is outside."""
    cases = CASES[field]
    below = (cases[0] if isinstance(cases, tuple) else cases).below_fires
    value = _at(PINNED[field], inside, below)
    _check(field, Thresholds(), value, inside)
    if inside:
        moved = Thresholds().replace(**{field: PINNED[field] * (0.8 if below else 1.2)})
        _check(field, moved, value, inside=False)


def test_every_module_threshold_is_a_field_tested_here() -> None:
    """The fields the rules read that are not SLOs or tested in test_rules.py are all here."""
    elsewhere = {
        "profile",
        "ttft_p95_s",
        "itl_p95_s",
        "error_rate",
        "gpu_memory_headroom",
        "sm_active",
        "dram_active_decode",
        "tensor_active_prefill",
        "alert_ttft_p95_s",
        "min_throughput_tok_s",
        "host_cpu_saturated",
        "host_run_queue_per_core",
        "server_cpu_wait_share",
        "host_other_cpu_share",
        "launch_gap_fraction",
        "launch_gap_roofline_share",
        "launch_bound_fraction",
        "prefill_ttft_share",
        "prompt_steps",
        "budget_prompt_fit",
        "budget_load",
    }
    fields = set(Thresholds.__dataclass_fields__)
    assert fields - elsewhere == set(CASES)


def test_the_two_busy_threads_are_two_thresholds() -> None:
    """The front end's event loop queues streams at 80 %; the engine loop is busy by design."""
    t = Thresholds()
    assert t.frontend_thread_busy < t.engine_thread_busy
    busy = make_evidence(proc__frontend_thread_cpu=0.9, proc__engine_thread_cpu=0.9)
    assert RULES["application.frontend_saturated"].fn(busy, t) is not None
    assert RULES["scheduling.engine_loop_cpu"].fn(busy, t) is None
