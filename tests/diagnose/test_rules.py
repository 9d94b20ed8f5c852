"""Every rule: fires / does not fire / evidence missing; plus a meta-test that all are covered."""

from __future__ import annotations

import pytest

from infertriage.diagnose import RULES, SIGNALS, diagnose_evidence
from infertriage.schemas import Layer, Status, Thresholds

from .evidence_helpers import DP_EVEN, HEALTHY, PD_HEALTHY, make_evidence

SLOW = {"client__ttft_p95_s": 0.9, "client__itl_p95_s": 0.12}

# rule id → (overrides that make it fire, overrides that keep it quiet, a needed signal)
CASES: dict[str, tuple[dict[str, float | None], dict[str, float | None], str]] = {
    "hardware.busy_not_computing": (
        {"gpu__util_mean": 0.97, "gpu__sm_active_mean": 0.2},
        {"gpu__util_mean": 0.97, "gpu__sm_active_mean": 0.85},
        "gpu.sm_active_mean",
    ),
    "hardware.hbm_bandwidth_bound": (
        {"gpu__dram_active_mean": 0.85, **SLOW},
        {"gpu__dram_active_mean": 0.85, "queue__running_max": 2, **SLOW},
        "gpu.dram_active_mean",
    ),
    "hardware.below_roofline": (
        {"client__throughput_tok_s": 500},
        {"client__throughput_tok_s": 3500},
        "plan.throughput_roofline_tok_s",
    ),
    "hardware.pcie_saturated": (
        {"gpu__pcie_utilization": 0.9},
        {"gpu__pcie_utilization": 0.5},
        "gpu.pcie_utilization",
    ),
    "hardware.xid_errors": ({"gpu__xid_errors": 79}, {"gpu__xid_errors": 0}, "gpu.xid_errors"),
    "hardware.profiling_counters_absent": (
        {"gpu__prof_fields_present": 0},
        {"gpu__prof_fields_present": 1},
        "gpu.prof_fields_present",
    ),
    "kernel.launch_bound": (
        {"trace__launch_gap_fraction": 0.6, "trace__cuda_graph_fraction": 0.0},
        {"trace__launch_gap_fraction": 0.6, "trace__cuda_graph_fraction": 0.95},
        "trace.launch_gap_fraction",
    ),
    "scheduling.prefill_token_budget": (
        {"config__max_num_batched_tokens": 256, "server__prefill_time_mean_s": 0.04},
        {"config__max_num_batched_tokens": 2048, "server__prefill_time_mean_s": 0.04},
        "server.prefill_time_mean_s",
    ),
    "kernel.unfused_attention": (
        {"trace__attention_unfused": 1},
        {"trace__attention_unfused": 0},
        "trace.attention_unfused",
    ),
    "kernel.recompilations": (
        {"trace__recompilations": 3},
        {"trace__recompilations": 0},
        "trace.recompilations",
    ),
    "kernel.host_wait": (
        {"trace__host_wait_fraction": 0.5},
        {"trace__host_wait_fraction": 0.1},
        "trace.host_wait_fraction",
    ),
    "kernel.sync_every_step": (
        {"trace__syncs_per_step": 3},
        {"trace__syncs_per_step": 1},  # the sampler's one per step
        "trace.syncs_per_step",
    ),
    "kernel.short_kernels": (
        {
            "trace__short_kernel_fraction": 0.9,
            "trace__cuda_graph_fraction": 0.0,
            "trace__gpu_idle_fraction": 0.4,
        },
        {"trace__short_kernel_fraction": 0.9, "trace__cuda_graph_fraction": 0.95},
        "trace.short_kernel_fraction",
    ),
    "hardware.pageable_memcpy": (
        {"trace__memcpy__pageable_fraction": 1.0, "trace__memcpy_fraction": 0.2},
        {"trace__memcpy__pageable_fraction": 1.0, "trace__memcpy_fraction": 0.005},
        "trace.memcpy_fraction",
    ),
    "memory.kv_pressure": (
        {"kv__usage_max": 0.99, "preemptions__total": 12},
        {"kv__usage_max": 0.99, "preemptions__total": 0, "queue__waiting_max": 0},
        "kv.usage_max",
    ),
    "memory.offload_not_paying": (
        {"offload__tier": 1.0, "offload__hit_share": 0.01, "offload__external_queries": 1e5},
        {"offload__tier": 1.0, "offload__hit_share": 0.6, "offload__external_queries": 1e5},
        "kv.usage_max",
    ),
    "memory.kv_leak": (
        {"kv__usage_after_drain": 0.2, "kv__usage_idle_slope": 0.001},
        {"kv__usage_after_drain": 0.0},
        "kv.usage_after_drain",
    ),
    "memory.headroom": (
        {"gpu__fb_used_fraction": 0.97},
        {"gpu__fb_used_fraction": 0.9},
        "gpu.fb_used_fraction",
    ),
    "memory.prefix_cache_low": (
        {"workload__prefix_reuse": 0.4, "prefix_cache__hit_rate": 0.02},
        {"workload__prefix_reuse": 0.4, "prefix_cache__hit_rate": 0.35},
        "prefix_cache.hit_rate",
    ),
    "memory.longer_than_plan": (
        {"client__mean_prompt_tokens": 2000},
        {"client__mean_prompt_tokens": 850},
        "plan.tokens_per_request",
    ),
    "scheduling.queue_dominates_ttft": (
        {"server__queue_time_mean_s": 0.6, "server__ttft_mean_s": 0.8, **SLOW},
        {"server__queue_time_mean_s": 0.6, "server__ttft_mean_s": 0.8, "kv__usage_max": 0.97},
        "queue.running_max",
    ),
    "scheduling.engine_loop_cpu": (
        {"proc__engine_thread_cpu": 0.99},
        {"proc__engine_thread_cpu": 0.6},
        "proc.engine_thread_cpu",
    ),
    "scheduling.step_cpu_gap": (
        {"trace__step_cpu_gap_fraction": 0.5},
        {"trace__step_cpu_gap_fraction": 0.1},
        "trace.step_cpu_gap_fraction",
    ),
    "scheduling.unbounded_queue": (
        {"queue__waiting_slope": 5, "queue__waiting_max": 200},
        {"queue__waiting_slope": 0.1, "queue__waiting_max": 3},
        "queue.waiting_max",
    ),
    "parallelism.communication_share": (
        {"trace__nccl_fraction": 0.45, "config__interconnect_pcie": 1},
        {"trace__nccl_fraction": 0.1},
        "trace.nccl_fraction",
    ),
    "parallelism.poor_overlap": (
        {"trace__nccl_fraction": 0.2, "trace__comm_overlap_fraction": 0.05},
        {"trace__nccl_fraction": 0.2, "trace__comm_overlap_fraction": 0.6},
        "trace.comm_overlap_fraction",
    ),
    "parallelism.rank_skew": (
        {"trace__rank_skew_fraction": 0.3},
        {"trace__rank_skew_fraction": 0.02},
        "trace.rank_skew_fraction",
    ),
    "speculative.low_acceptance": (
        {"spec__acceptance_rate": 0.2},
        {"spec__acceptance_rate": 0.75},
        "spec.acceptance_rate",
    ),
    "speculative.acceptance_decay": (
        {"spec__acceptance_decay": 0.1},
        {"spec__acceptance_decay": 0.6},
        "spec.acceptance_decay",
    ),
    "application.client_vs_server_ttft": (
        {"client__ttft_p50_s": 0.5, "server__ttft_p50_s": 0.04},
        {"client__ttft_p50_s": 0.06, "server__ttft_p50_s": 0.04},
        "server.ttft_p50_s",
    ),
    "application.frontend_saturated": (
        {"proc__frontend_thread_cpu": 0.95},
        {"proc__frontend_thread_cpu": 0.5},
        "proc.frontend_thread_cpu",
    ),
    "application.frontend_per_token": (
        {"proc__frontend_cpu_per_token_s": 400e-6},
        {"proc__frontend_cpu_per_token_s": 60e-6},
        "proc.frontend_cpu_per_token_s",
    ),
    "application.buffering_proxy": (
        {"client__itl_p95_s": 0.2, "server__itl_p95_s": 0.02},
        {"client__itl_p95_s": 0.03, "server__itl_p95_s": 0.02},
        "server.itl_p95_s",
    ),
    "application.error_rate": (
        {"client__num_errors": 20, "client__num_requests": 400, "client__error_rate": 0.05},
        {"client__num_errors": 0, "client__num_requests": 400, "client__error_rate": 0.0},
        "client.num_errors",
    ),
    "application.admission_control": (
        {"client__admission_rate": 0.2},
        {"client__admission_rate": 0.0005},
        "client.admission_rate",
    ),
    "application.stream_cut": (
        {"client__stream_cut_fraction": 0.3, "client__stream_cut_at_s": 2.0},
        {"client__stream_cut_fraction": 0.0},
        "client.stream_cut_fraction",
    ),
    "application.client_bound": ({"client__bound": 1}, {"client__bound": 0}, "client.bound"),
    "application.server_restarted": (
        {"server__restarts": 1},
        {"server__restarts": 0},
        "server.restarts",
    ),
    "parallelism.scaling_below_plan": (
        {"scaling__efficiency": 0.55, "scaling__plan_efficiency": 0.9},
        {"scaling__efficiency": 0.8, "scaling__plan_efficiency": 0.9},
        "scaling.efficiency",
    ),
    "memory.out_of_memory": ({"log__oom_errors": 2}, {"log__oom_errors": 0}, "log.oom_errors"),
    "memory.prompt_reprocessed": (
        {"log__cache_misses": 9, "log__cache_miss_share": 0.9},
        {"log__cache_misses": 0},
        "log.cache_misses",
    ),
    "memory.preempted": (
        {"preemptions__total": 40, "kv__usage_max": None},
        {"preemptions__total": 0},
        "preemptions.total",
    ),
    "memory.kv_below_context": (
        {"log__kv_cache_short": 1, "config__kv_cache_tokens": 3984, "config__max_model_len": 30000},
        {"log__kv_cache_short": 0},
        "log.kv_cache_short",
    ),
    "scheduling.prompt_over_limit": (
        {"log__prompts_over_limit": 3, "log__prompt_limit_tokens": 2048},
        {"log__prompts_over_limit": 0},
        "log.prompts_over_limit",
    ),
    "scheduling.prefill_blocks_decode": (
        {"log__prefill_only_share": 0.6},
        {"log__prefill_only_share": 0.1},
        "log.prefill_only_share",
    ),
    "application.client_aborts": ({"log__aborted": 9}, {"log__aborted": 1}, "log.aborted"),
    "kernel.eager_decode": (
        {"log__eager_decode_share": 0.9, "log__eager_decode_step_s": 0.01},
        {"log__eager_decode_share": 0.1},
        "log.eager_decode_share",
    ),
    # the start-up's word alone: no per-step line nor trace judges it
    "kernel.graphs_off": (
        {
            "config__cuda_graphs": 0,
            "log__eager_decode_share": None,
            "trace__cuda_graph_fraction": None,
        },
        {"config__cuda_graphs": 1, "log__eager_decode_share": None},
        "config.cuda_graphs",
    ),
    "kernel.attention_fallback": (
        {"log__attention_fallbacks": 1, "log__attention_fallback_reason": 1},
        {"log__attention_fallbacks": 0},
        "log.attention_fallbacks",
    ),
    "memory.context_shift": (
        {"log__context_shifts": 3},
        {"log__context_shifts": 0},
        "log.context_shifts",
    ),
    "parallelism.collective_timeout": (
        {"log__collective_timeouts": 1},
        {"log__collective_timeouts": 0},
        "log.collective_timeouts",
    ),
    "parallelism.kv_transfer": (
        {"pd__kv_transfer_p95_s": 0.4},
        {"pd__kv_transfer_p95_s": 0.02},
        "pd.kv_transfer_failures",
    ),
    "scheduling.engine_stuck": (
        {"log__engine_stuck_s": 240},
        {"log__engine_stuck_s": 30},
        "log.engine_stuck_s",
    ),
    "parallelism.dp_rank_imbalance": (
        {
            **DP_EVEN,
            "dp__imbalance": 1.9,
            "dp__busiest_running": 64,
            "dp__busiest_waiting": 30,
            "dp__idlest_running": 2,
            "dp__idlest_kv_usage": 0.05,
        },
        {**DP_EVEN, "dp__imbalance": 1.2},
        "dp.ranks",
    ),
    "parallelism.kv_transfer_bound": (
        {**PD_HEALTHY, "pd__transfer_time_mean_s": 0.6, "pd__transfer_ttft_share": 0.72},
        PD_HEALTHY,
        "pd.transfer_time_mean_s",
    ),
    "parallelism.pd_ratio_mismatch": (
        {**PD_HEALTHY, "pd__prefill_waiting_per_instance": 40, "pd__decode_kv_usage": 0.08},
        PD_HEALTHY,
        "pd.prefill_instances",
    ),
    "parallelism.prefix_affinity_lost": (
        {**DP_EVEN, "dp__prefix_hit_rate_spread": 0.78},
        {**DP_EVEN, "dp__prefix_hit_rate_spread": 0.03},
        "dp.ranks",
    ),
    "application.replica_imbalance": (
        {"fleet__replicas": 4, "fleet__imbalance": 2.5, "fleet__busiest_excess": 6.0},
        {"fleet__replicas": 4, "fleet__imbalance": 1.2, "fleet__busiest_excess": 0.8},
        "fleet.replicas",
    ),
    "application.host_contention": (
        {
            "host__server_local": 1,
            "host__cpu_mean": 0.98,
            "host__run_queue_per_core": 2.4,
            "host__other_cpu_share": 0.4,
        },
        {"host__server_local": 0, "host__cpu_mean": 0.98, "host__run_queue_per_core": 2.4},
        "host.cpu_mean",
    ),
    # expert and pipeline parallelism
    "parallelism.expert_imbalance": (
        {"ep__hot_rank_ratio": 2.5, "ep__balancedness_mean": 0.4, "config__expert_parallel": 4},
        {"ep__hot_rank_ratio": 1.05, "ep__balancedness_mean": 0.95, "config__expert_parallel": 4},
        "ep.hot_rank_ratio",
    ),
    "parallelism.pipeline_bubble": (
        {
            "config__pipeline_parallel": 4,
            "gpu__busy_by_gpu_mean": 0.49,
            "gpu__busy_by_gpu_max": 0.98,
            "gpu__busy_by_gpu_min": 0.33,
        },
        {
            "config__pipeline_parallel": 4,
            "gpu__busy_by_gpu_mean": 0.95,
            "gpu__busy_by_gpu_max": 0.97,
            "gpu__busy_by_gpu_min": 0.93,
        },
        "gpu.busy_by_gpu_mean",
    ),
}


# rules on the evidence itself (`evidence.*`): they need no signal, run on every evidence, put
# their finding in the layer of what they judge, and explain nothing of the symptom
# rule id → (overrides that make it fire, the layer its finding then lands in)
EVIDENCE_CASES: dict[str, tuple[dict[str, float], Layer]] = {
    "evidence.metric_artefact": (
        {"artefact.fraction_above_one:kv.usage": 97.0},
        Layer.MEMORY,
    ),
}


def test_every_rule_has_a_case_and_ids_are_unique() -> None:
    assert set(CASES) | set(EVIDENCE_CASES) == set(RULES)
    assert not set(CASES) & set(EVIDENCE_CASES)
    for registered in RULES.values():
        prefix = "evidence." if registered.id in EVIDENCE_CASES else registered.layer.value + "."
        assert registered.id.startswith(prefix)
        assert all(name in SIGNALS for name in registered.needs)


@pytest.mark.parametrize("rule_id", sorted(EVIDENCE_CASES))
def test_an_evidence_rule_fires_in_its_layer_and_explains_nothing(rule_id: str) -> None:
    fire, layer = EVIDENCE_CASES[rule_id]
    assert RULES[rule_id].needs == ()
    finding = RULES[rule_id].fn(make_evidence(**fire), Thresholds())
    assert finding is not None and finding.id == rule_id and finding.layer is layer
    assert finding.status is Status.WARNING and finding.explains == 0 and finding.score == 0
    assert finding.next_steps and finding.evidence
    assert RULES[rule_id].fn(make_evidence(), Thresholds()) is None
    # ranked in, it is a warning of its layer and never the primary
    diagnosis = diagnose_evidence(make_evidence(**fire), Thresholds())
    assert diagnosis.layer(layer).status is Status.WARNING
    assert diagnosis.primary is None or diagnosis.primary.finding != rule_id


def test_a_rule_that_needs_nothing_does_not_make_a_layer_ok() -> None:
    """Silent, a rule that needs no signal judged nothing: a layer whose other rules all lack
    their evidence stays unknown."""
    names = {name for r in RULES.values() if r.layer is Layer.SCHEDULING for name in r.needs}
    diagnosis = diagnose_evidence(make_evidence(**dict.fromkeys(names)), Thresholds())
    assert diagnosis.layer(Layer.SCHEDULING).status is Status.UNKNOWN


def test_healthy_evidence_covers_every_signal() -> None:
    assert set(HEALTHY) == set(SIGNALS)


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_fires(rule_id: str) -> None:
    fire, _, _ = CASES[rule_id]
    finding = RULES[rule_id].fn(make_evidence(**fire), Thresholds())
    assert finding is not None, rule_id
    assert finding.id == rule_id and finding.layer is RULES[rule_id].layer
    assert 0 < finding.score <= 1 and finding.next_steps and finding.evidence


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_stays_quiet(rule_id: str) -> None:
    _, quiet, _ = CASES[rule_id]
    assert RULES[rule_id].fn(make_evidence(**quiet), Thresholds()) is None
    assert RULES[rule_id].fn(make_evidence(), Thresholds()) is None


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_with_missing_evidence_is_not_evaluated(rule_id: str) -> None:
    fire, _, needed = CASES[rule_id]
    evidence = make_evidence(**{**fire, needed.replace(".", "__"): None})
    assert RULES[rule_id].missing(evidence) == (needed,)
    diagnosis = diagnose_evidence(evidence, Thresholds())
    layer = diagnosis.layer(RULES[rule_id].layer)
    assert all(f.id != rule_id for f in layer.findings)
    assert any(line.startswith(needed + ":") for line in layer.missing) or (
        layer.status is Status.NOT_APPLICABLE
    )


def test_a_full_batch_with_kv_room_is_queue_bound_without_queue_times() -> None:
    evidence = make_evidence(
        server__queue_time_mean_s=None,
        config__max_num_seqs=8,
        queue__running_max=8,
        queue__waiting_max=8,
        **SLOW,
    )
    finding = RULES["scheduling.queue_dominates_ttft"].fn(evidence, Thresholds())
    assert finding is not None and finding.status is Status.BOTTLENECK
    assert "8 requests wait while all 8 seats are taken" in finding.title


def test_healthy_run_has_no_bottleneck() -> None:
    diagnosis = diagnose_evidence(make_evidence(), Thresholds())
    assert diagnosis.primary is None
    assert all(layer.status is Status.OK for layer in diagnosis.layers)


def test_coarse_blocks_make_the_cache_full_below_95_percent() -> None:
    # As measured on vLLM 0.32 (CPU build): 24 blocks of 128 tokens, ~1,000-token prompts,
    # KV at 78 % with 26 waiting: 5 blocks free where a request needs 9.
    ev = make_evidence(
        kv__usage_max=0.78, config__num_gpu_blocks=24, config__block_size=128,
        client__mean_prompt_tokens=1014, client__mean_output_tokens=64,
        queue__waiting_max=26, preemptions__total=0, server__queue_time_mean_s=1.4,
        server__ttft_mean_s=1.5,
    )  # fmt: skip
    diagnosis = diagnose_evidence(ev, Thresholds())
    found = {f.id: f for layer in diagnosis.layers for f in layer.findings}
    assert "memory.kv_pressure" in found
    assert "5 blocks free, 9 needed" in found["memory.kv_pressure"].title
    assert "scheduling.queue_dominates_ttft" not in found  # waiting for memory, not seats
    roomy = make_evidence(
        kv__usage_max=0.78, config__num_gpu_blocks=2400, config__block_size=128,
        client__mean_prompt_tokens=1014, client__mean_output_tokens=64, queue__waiting_max=26,
        preemptions__total=0,
    )  # fmt: skip
    found = {
        f.id for layer in diagnose_evidence(roomy, Thresholds()).layers for f in layer.findings
    }
    assert "memory.kv_pressure" not in found


def test_all_slots_taken_is_scheduling_without_histograms_or_kv_usage() -> None:
    # llama-server -np 1 (build 11434): no TTFT histogram, no KV usage, /slots says 1 slot.
    ev = make_evidence(
        server__ttft_mean_s=None, server__queue_time_mean_s=None, kv__usage_max=None,
        config__max_num_seqs=1, queue__running_max=1, queue__waiting_max=32,
        client__ttft_p95_s=0.279,
    )  # fmt: skip
    diagnosis = diagnose_evidence(ev, Thresholds())
    assert diagnosis.primary is not None and diagnosis.primary.layer == "scheduling"
    finding = next(f for f in diagnosis.layers[3].findings if f.id.endswith("queue_dominates_ttft"))
    assert finding.title == "32 requests wait while all 1 seats are taken"


@pytest.mark.parametrize(
    ("after_drain", "peak", "fires"),
    [
        # qwen2.5-0.5b on an A100 (5.7 M tokens of KV), every request's blocks leaked, as the
        # property benchmark measured it: 1.8 % used after the drain, all of the load's peak
        (0.0181, 0.0181, True),
        (0.006, 0.010, True),  # most of the peak never came back
        (0.004, 0.40, False),  # 1 % of the peak: not a leak below the absolute residue
        (0.001, 0.001, False),  # the gauge's rounding
        (0.03, 0.90, True),  # above the absolute residue whatever the peak
    ],
)
def test_a_leak_on_a_large_cache_is_judged_against_the_peak(
    after_drain: float, peak: float, fires: bool
) -> None:
    ev = make_evidence(kv__usage_after_drain=after_drain, kv__usage_max=peak)
    finding = RULES["memory.kv_leak"].fn(ev, Thresholds())
    assert (finding is not None) is fires
    if finding is not None:
        assert finding.status is Status.BOTTLENECK and finding.severity >= min(
            1.0, after_drain / peak
        )


def test_queueing_with_seats_free_is_a_warning_not_a_seat_cap() -> None:
    # llama-3.1-8b on an L4 (property benchmark): 16 of 256 seats used, queue 87 % of TTFT
    # while 2k-token prompts share a 4,096-token budget; ITL 92 ms at the HBM roofline
    free = make_evidence(
        server__queue_time_mean_s=1.08, server__ttft_mean_s=1.24, config__max_num_seqs=256,
        queue__running_max=16, queue__waiting_max=2, kv__usage_max=0.25, **SLOW,
    )  # fmt: skip
    finding = RULES["scheduling.queue_dominates_ttft"].fn(free, Thresholds())
    assert finding is not None and finding.status is Status.WARNING
    assert "16 of 256 seats used" in finding.title
    full = make_evidence(
        server__queue_time_mean_s=1.08, server__ttft_mean_s=1.24, config__max_num_seqs=16,
        queue__running_max=16, queue__waiting_max=2, kv__usage_max=0.25, **SLOW,
    )  # fmt: skip
    finding = RULES["scheduling.queue_dominates_ttft"].fn(full, Thresholds())
    assert finding is not None and finding.status is Status.BOTTLENECK


@pytest.mark.parametrize(
    ("tok_s", "out_tokens", "status"),
    [
        # a small model on a fast server (llama.cpp, 32-token answers at ~150 requests/s): the
        # overload step's 1,200 deferred requests are 8 s of work, not minutes
        (4_800.0, 32.0, Status.WARNING),
        # the same count behind an 8B at 12 requests/s: 100 s of queue
        (3_000.0, 250.0, Status.BOTTLENECK),
        # no request rate measured (a log, one scrape): judged by the count alone
        (None, None, Status.BOTTLENECK),
    ],
)
def test_a_long_queue_is_minutes_of_work_at_the_measured_rate(
    tok_s: float | None, out_tokens: float | None, status: Status
) -> None:
    ev = make_evidence(
        queue__waiting_max=1_200, queue__waiting_slope=40.0,
        client__throughput_tok_s=tok_s, client__mean_output_tokens=out_tokens,
    )  # fmt: skip
    finding = RULES["scheduling.unbounded_queue"].fn(ev, Thresholds())
    assert finding is not None and finding.status is status
    assert ("at the measured rate" in finding.title) is (tok_s is not None)


@pytest.mark.parametrize(
    ("client_p50", "server_p50", "server_p95", "fires"),
    [
        # qwen2.5-7b with a 9k-token KV cache (property benchmark, case 103): the first burst
        # got first tokens in 0.15–0.27 s, later requests waited 2.4 s for blocks; the
        # server's histogram holds both, the client's steady window only the later ones
        (2.42, 0.42, 3.69, False),
        (1.5, 0.03, 0.08, True),  # a saturated front end: the engine answers in 30 ms
        (0.30, 0.012, None, True),  # no server p95: judged by the medians alone
    ],
)
def test_client_ttft_within_the_engines_own_spread_is_not_the_front_end(
    client_p50: float, server_p50: float, server_p95: float | None, fires: bool
) -> None:
    ev = make_evidence(
        client__ttft_p50_s=client_p50, server__ttft_p50_s=server_p50, server__ttft_p95_s=server_p95
    )
    finding = RULES["application.client_vs_server_ttft"].fn(ev, Thresholds())
    assert (finding is not None) is fires


# --- the error rate judged with its interval (Clopper–Pearson, 95 %; SLO 0.1 %) -------------


@pytest.mark.parametrize(
    ("errors", "requests", "status", "words"),
    [
        (20, 400, Status.BOTTLENECK, "over the error-rate SLO of 0.10%"),
        (3, 100, Status.BOTTLENECK, "3 of 100 requests failed (3.0%"),  # low bound 0.62 %
        (1, 100, Status.WARNING, "would settle it"),  # 1 %: its interval reaches down to 0.03 %
        (1, 400, Status.WARNING, "too few requests to tell it from the SLO of 0.10%"),
        (0, 400, None, ""),
        (1, 2000, None, ""),  # 0.05 %: within the SLO
    ],
)
def test_the_error_rate_is_a_bottleneck_only_when_its_interval_is_above_the_slo(
    errors: int, requests: int, status: Status | None, words: str
) -> None:
    rate = errors / requests
    ev = make_evidence(
        client__num_errors=errors, client__num_requests=requests, client__error_rate=rate
    )
    finding = RULES["application.error_rate"].fn(ev, Thresholds())
    if status is None:
        assert finding is None
        return
    assert finding is not None and finding.status is status and words in finding.title


def test_a_rare_error_says_how_many_requests_would_settle_it() -> None:
    ev = make_evidence(client__num_errors=1, client__num_requests=250, client__error_rate=0.004)
    finding = RULES["application.error_rate"].fn(ev, Thresholds())
    assert finding is not None and finding.status is Status.WARNING
    # P(X ≥ 0.004·n | p = 0.001) falls below 2.5 % at n = 908 (see tests/analyze/test_binomial)
    assert "about 908 requests at this rate would settle it" in finding.title
    assert any("908" in step for step in finding.next_steps)


def test_one_error_in_a_healthy_run_is_no_bottleneck_anywhere() -> None:
    """The twin's healthy run with one failure in 100 (1 %) was once called application-bound."""
    ev = make_evidence(client__num_errors=1, client__num_requests=100, client__error_rate=0.01)
    diagnosis = diagnose_evidence(ev, Thresholds())
    assert diagnosis.primary is None
    assert diagnosis.layer(Layer.APPLICATION).status is Status.WARNING


def test_refusals_for_load_are_an_admission_warning_not_an_error_bottleneck() -> None:
    ev = make_evidence(client__admission_rate=0.3)
    diagnosis = diagnose_evidence(ev, Thresholds())
    findings = {f.id: f for layer in diagnosis.layers for f in layer.findings}
    assert "application.error_rate" not in findings
    refused = findings["application.admission_control"]
    assert refused.status is Status.WARNING and "30.0% of requests for load (HTTP 429)" in (
        refused.title
    )
    assert diagnosis.primary is None


# --- the load client and the server on one host ---------------------------------------------

# two cores, the twin's front end and the load client on them: all busy, threads queue
CONTENDED = {
    "host__server_local": 1, "host__cpu_mean": 0.97, "host__cores": 2,
    "host__run_queue_per_core": 2.2, "proc__cpu_wait_share": 0.35, "host__client_cpu_cores": 0.9,
    "host__other_cpu_share": 0.45,
}  # fmt: skip


@pytest.mark.parametrize(
    ("overrides", "contended"),
    [
        (CONTENDED, True),
        ({**CONTENDED, "host__server_local": 0}, False),  # the server elsewhere: CPU its own
        ({**CONTENDED, "host__cpu_mean": 0.7}, False),  # room left on the host
        # busy, but every runnable thread found a CPU
        ({**CONTENDED, "host__run_queue_per_core": 0.9, "proc__cpu_wait_share": 0.05}, False),
        ({**CONTENDED, "host__run_queue_per_core": 0.9}, True),  # the server's threads starved
        ({**CONTENDED, "proc__cpu_wait_share": None}, True),  # no schedstat: the run queue
        ({**CONTENDED, "proc__cpu_wait_share": None, "host__run_queue_per_core": None}, True),
        # the server's own threads fill the host (a saturated front end, a client at 0.1 core)
        ({**CONTENDED, "host__other_cpu_share": 0.08}, False),
        ({**CONTENDED, "host__other_cpu_share": None}, True),  # no server pid: judged without
    ],
)
def test_a_shared_saturated_host_is_a_caveat_never_a_bottleneck(
    overrides: dict[str, float], contended: bool
) -> None:
    finding = RULES["application.host_contention"].fn(make_evidence(**overrides), Thresholds())
    assert (finding is not None) is contended
    if finding is not None:
        assert finding.status is Status.WARNING and finding.caveat
        assert "shared a saturated host (host CPU 97% busy" in finding.caveat
        assert finding.next_steps[0].startswith("rerun the load from another host")
        assert any("--concurrency" in step and "--workers" in step for step in finding.next_steps)


def test_a_host_saturated_by_other_processes_says_so() -> None:
    # 0.9 of 2 cores not the server's, 0.1 of them the load client's: someone else's CPU
    quiet_client = make_evidence(**{**CONTENDED, "host__client_cpu_cores": 0.1})
    finding = RULES["application.host_contention"].fn(quiet_client, Thresholds())
    assert finding is not None
    assert finding.caveat.startswith("the server shared a saturated host with other processes")
    loud_client = RULES["application.host_contention"].fn(make_evidence(**CONTENDED), Thresholds())
    assert loud_client is not None
    assert loud_client.caveat.startswith("the load client and the server shared")


def test_the_front_end_is_not_blamed_for_a_host_the_client_saturates() -> None:
    slow_front = {
        "proc__frontend_thread_cpu": 0.95, "client__ttft_p50_s": 0.5, "server__ttft_p50_s": 0.04,
        "trace__host_wait_fraction": 0.5, "client__ttft_p95_s": 0.9,
    }  # fmt: skip
    free = diagnose_evidence(make_evidence(**slow_front), Thresholds())
    assert free.primary is not None and free.primary.finding == "application.frontend_saturated"
    shared = diagnose_evidence(make_evidence(**slow_front, **CONTENDED), Thresholds())
    found = {f.id: f for layer in shared.layers for f in layer.findings}
    for rule_id in ("application.frontend_saturated", "application.client_vs_server_ttft"):
        assert found[rule_id].status is Status.WARNING, rule_id
        assert "cannot be told apart from that contention" in found[rule_id].caveat
        assert found[rule_id].next_steps[0].startswith("rerun the load from another host")
        assert any(e.signal == "proc.cpu_wait_share" for e in found[rule_id].evidence)
    assert found["application.host_contention"].status is Status.WARNING
    # the GPU waiting on a starved front end says nothing of the GPU: no primary, a missed SLO
    assert found["kernel.host_wait"].status is Status.WARNING and shared.primary is None
    assert "contention may explain" in found["kernel.host_wait"].caveat
    assert not [layer for layer in shared.layers if layer.status is Status.BOTTLENECK]
    assert [r.name for r in shared.slo if r.passed is False] == ["ttft_p95"]
    # a cause the contention does not explain is still the primary on the shared host
    full = make_evidence(
        **slow_front, **CONTENDED, kv__usage_max=0.99, preemptions__total=12
    )  # fmt: skip
    kv = diagnose_evidence(full, Thresholds())
    assert kv.primary is not None and kv.primary.finding == "memory.kv_pressure"


# Rules at their thresholds: 5 % inside fires, 5 % outside stays quiet, so a threshold
# moved by 10 % breaks one of the two.
def _at(threshold: float, inside: bool, below_fires: bool = False) -> float:
    return threshold * (1.05 if inside != below_fires else 0.95)


@pytest.mark.parametrize("inside", [True, False])
def test_launch_bound_at_its_gap_threshold(inside: bool) -> None:
    t = Thresholds()
    gaps = _at(t.launch_gap_fraction, inside)
    ev = make_evidence(trace__launch_gap_fraction=gaps, trace__cuda_graph_fraction=0.0,
                       config__cuda_graphs=0)  # fmt: skip
    finding = RULES["kernel.launch_bound"].fn(ev, t)
    assert (finding is not None) is inside
    if finding is not None:  # the case study's words: CUDA graphs, and both engines' flags
        assert "CUDA graphs off" in finding.title and "--enforce-eager" in finding.next_steps[0]
        assert "--disable-cuda-graph" in finding.next_steps[0]


def test_launch_bound_needs_graphs_off_by_the_servers_word_or_the_trace() -> None:
    t = Thresholds()
    # on by the server's word, yet the trace ran outside graphs: a batch past the capture sizes
    unused = make_evidence(trace__launch_gap_fraction=0.3, trace__cuda_graph_fraction=0.1,
                           config__cuda_graphs=1)  # fmt: skip
    finding = RULES["kernel.launch_bound"].fn(unused, t)
    assert finding is not None and "CUDA graphs not used" in finding.title
    on = make_evidence(trace__launch_gap_fraction=0.3, trace__cuda_graph_fraction=0.9,
                       config__cuda_graphs=1)  # fmt: skip
    off = make_evidence(trace__launch_gap_fraction=0.3, trace__cuda_graph_fraction=0.9,
                        config__cuda_graphs=0)  # fmt: skip
    assert RULES["kernel.launch_bound"].fn(on, t) is None
    assert RULES["kernel.launch_bound"].fn(off, t) is not None


@pytest.mark.parametrize("inside", [True, False])
def test_launch_bound_is_a_bottleneck_at_its_share_of_the_roofline_gap(inside: bool) -> None:
    # No SLO missed: a bottleneck only when the idle time explains enough of the gap to the
    # roofline. Throughput T, roofline R: idle g lifts T to T / (1 - g), which explains
    # (T / (1 - g) - T) / (R - T) of the gap; solve for the g that explains the threshold.
    t = Thresholds()
    measured, ceiling = 1000.0, 4000.0
    share = _at(t.launch_gap_roofline_share, inside)
    lifted = measured + share * (ceiling - measured)
    gaps = 1 - measured / lifted
    ev = make_evidence(
        trace__launch_gap_fraction=gaps,
        trace__cuda_graph_fraction=0.0,
        client__throughput_tok_s=measured,
        plan__throughput_roofline_tok_s=ceiling,
    )
    finding = RULES["kernel.launch_bound"].fn(ev, t)
    assert finding is not None
    assert (finding.status is Status.BOTTLENECK) is inside


def test_the_seeds_case_study_names_cuda_graphs_and_chains_to_busy_not_computing() -> None:
    # GPU util 97 %, SM active 60 %, 21 % of the GPU's time between kernels, graphs off.
    ev = make_evidence(gpu__util_mean=0.97, gpu__sm_active_mean=0.6,
                       trace__launch_gap_fraction=0.21, trace__cuda_graph_fraction=0.0,
                       trace__kernels_per_step=700, **SLOW)  # fmt: skip
    diagnosis = diagnose_evidence(ev, Thresholds())
    assert diagnosis.primary is not None and diagnosis.primary.finding == "kernel.launch_bound"
    chain = [link.finding for link in diagnosis.chain]
    assert chain[:2] == ["kernel.launch_bound", "hardware.busy_not_computing"]
    assert diagnosis.symptom.startswith("TTFT p95 900 ms (SLO 200 ms)")


@pytest.mark.parametrize("inside", [True, False])
def test_prefill_token_budget_at_its_steps_threshold(inside: bool) -> None:
    t = Thresholds()
    budget = 256.0
    prompt = _at(t.prompt_steps, inside) * budget
    # every seat taken: the steps alone decide (with seats free, a prompt longer than what
    # a step leaves after its decodes is the budget's too: test_budget_throughput.py)
    ev = make_evidence(config__max_num_batched_tokens=budget, client__mean_prompt_tokens=prompt,
                       server__prefill_time_mean_s=0.04, queue__running_max=256)  # fmt: skip
    assert (RULES["scheduling.prefill_token_budget"].fn(ev, t) is not None) is inside


@pytest.mark.parametrize("inside", [True, False])
def test_prefill_token_budget_at_its_share_of_ttft(inside: bool) -> None:
    # Seats free: prefill and the wait to be scheduled count; HEALTHY's TTFT mean is 50 ms.
    t = Thresholds()
    starved = _at(t.prefill_ttft_share, inside) * 0.05
    ev = make_evidence(config__max_num_batched_tokens=256, server__prefill_time_mean_s=starved / 2,
                       server__queue_time_mean_s=starved / 2)  # fmt: skip
    finding = RULES["scheduling.prefill_token_budget"].fn(ev, t)
    assert (finding is not None) is inside
    if finding is not None:
        assert "--max-num-batched-tokens" in finding.next_steps[0]
        assert "(now 256)" in finding.next_steps[0]


def test_prefill_token_budget_reads_the_largest_step_without_the_setting() -> None:
    ev = make_evidence(config__max_num_batched_tokens=None, server__step_tokens_max=256,
                       server__prefill_time_mean_s=0.04, client__ttft_p95_s=0.9)  # fmt: skip
    diagnosis = diagnose_evidence(ev, Thresholds())
    assert diagnosis.primary is not None
    assert diagnosis.primary.finding == "scheduling.prefill_token_budget"
    finding = diagnosis.layer(Layer.SCHEDULING).findings[0]
    assert "no engine step exceeded 256 tokens" in finding.title


@pytest.mark.parametrize(
    ("largest", "hit", "reuse", "fires"),
    [
        (8, 0.993, 0.99, False),
        (512, 0.0, 0.98, True),
        (256, None, 0.94, True),
        (8, 0.5, 0.5, True),
        (8, 0.0, 0.0, True),
    ],
)
def test_the_largest_step_bounds_the_budget_only_where_prompts_needed_more(
    largest: float, hit: float | None, reuse: float, fires: bool
) -> None:
    # One stream (healthy, --concurrency 1): the measured level resent the warm-up's prompts,
    # the prefix cache served 99 % of their tokens, and no step in the window exceeded the
    # 8-token bucket; "prompts average 524 tokens, about 65 steps each" was false. Prompts
    # that computed 262 tokens each (half of them hit) needed larger steps than 8: the bound
    # holds, and the rule fires on it. The reuse the client sent is no hit: with the server
    # counting none (0 %, or a cache that is off: no counter) 98 % or 94 % reuse sent
    # computed whole prompts, which needed more than a 512- or 256-token step (a review's
    # twin case: caching off, `max_num_batched_tokens: 256`, 2,048-token shared prefixes:
    # the primary, which the reuse had silenced).
    ev = make_evidence(config__max_num_batched_tokens=None, server__step_tokens_max=largest,
                       client__mean_prompt_tokens=524, prefix_cache__hit_rate=hit,
                       workload__prefix_reuse=reuse, server__ttft_mean_s=0.0107,
                       server__prefill_time_mean_s=0.0069, server__queue_time_mean_s=0.0,
                       queue__running_max=1)  # fmt: skip
    finding = RULES["scheduling.prefill_token_budget"].fn(ev, Thresholds())
    assert (finding is not None) is fires
    if finding is not None:
        assert f"no engine step exceeded {largest} tokens" in finding.title


def test_an_slo_miss_no_rule_explains_is_said_with_what_is_missing() -> None:
    ev = make_evidence(client__ttft_p95_s=0.206, trace__launch_gap_fraction=None)
    diagnosis = diagnose_evidence(ev, Thresholds())
    assert diagnosis.primary is None and diagnosis.unexplained is not None
    assert diagnosis.unexplained.line == "TTFT p95 206 ms misses 200 ms; no layer explains it"
    assert any(line.startswith("trace.launch_gap_fraction:") for line in
               diagnosis.unexplained.missing)  # fmt: skip
    assert diagnosis.to_json_dict()["primary"] is None


def test_no_miss_no_unexplained_and_no_symptom() -> None:
    diagnosis = diagnose_evidence(make_evidence(), Thresholds())
    assert diagnosis.unexplained is None and diagnosis.symptom == ""


def test_a_server_histogram_absent_from_a_scraped_server_says_why() -> None:
    # scraped (server TTFT and KV read) but no request finished: not "pass --metrics-url"
    scraped = make_evidence(server__prefill_time_mean_s=None, client__ttft_p95_s=0.9)
    missing = diagnose_evidence(scraped, Thresholds()).layer(Layer.SCHEDULING).missing
    line = next(m for m in missing if m.startswith("server.prefill_time_mean_s:"))
    assert "no request of the measured level finished" in line
    blind = make_evidence(server__prefill_time_mean_s=None, server__ttft_mean_s=None,
                          kv__usage_max=None, client__ttft_p95_s=0.9)  # fmt: skip
    missing = diagnose_evidence(blind, Thresholds()).layer(Layer.SCHEDULING).missing
    assert "server.prefill_time_mean_s: scrape the server: `--metrics-url URL/metrics`" in missing


def test_hbm_roofline_near_the_itl_slo_is_a_warning_and_a_miss_a_bottleneck() -> None:
    t = Thresholds()
    rule = RULES["hardware.hbm_bandwidth_bound"].fn
    near = rule(make_evidence(gpu__dram_active_mean=0.85, client__itl_p95_s=0.9 * t.itl_p95_s), t)
    assert near is not None and near.status is Status.WARNING
    assert "no headroom" in near.title
    missed = rule(make_evidence(gpu__dram_active_mean=0.85, client__itl_p95_s=1.5 * t.itl_p95_s), t)
    assert missed is not None and missed.status is Status.BOTTLENECK
    roomy = rule(make_evidence(gpu__dram_active_mean=0.85, client__itl_p95_s=0.5 * t.itl_p95_s), t)
    assert roomy is None


def test_communication_replicas_would_not_pay_is_a_bottleneck_with_slos_met() -> None:
    # TP 2 over PCIe, all-reduce 38 % of GPU time, SLOs met: TP 1 replicas fit (the plan)
    rule, t = RULES["parallelism.communication_share"].fn, Thresholds()
    needed = make_evidence(trace__nccl_fraction=0.38, config__interconnect_pcie=1.0)
    found = rule(needed, t)
    assert found is not None and found.status is Status.WARNING  # TP 2 is the smallest
    avoidable = make_evidence(trace__nccl_fraction=0.38, config__interconnect_pcie=1.0,
                              plan__smallest_tp_that_fits=1.0)  # fmt: skip
    found = rule(avoidable, t)
    assert found is not None and found.status is Status.BOTTLENECK
    assert "TP 1 replicas would fit, up to 1.6× the throughput" in found.title
    assert found.next_steps[0].startswith("run 2 replicas of TP 1 instead")
    # over NVLink TP buys lower ITL: a choice the SLOs judge, so only said (a warning)
    nvlink = make_evidence(trace__nccl_fraction=0.38, config__interconnect_pcie=0.0,
                           plan__smallest_tp_that_fits=1.0)  # fmt: skip
    found = rule(nvlink, t)
    assert found is not None and found.status is Status.WARNING
    assert "TP 1 replicas would fit" in found.title
