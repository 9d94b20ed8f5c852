"""`make_evidence(**overrides)`: a healthy run's signals, with some changed or removed.

A keyword is a signal name with `__` for `.` (`kv__usage_max=0.99`); `None`
removes the signal, so a rule's "evidence missing" case is one keyword. Names no
rule needs (an artefact's `artefact.negative_gauge:queue.waiting`, a rank's
`dp.running_by_rank.0`) go in as `**{name: value}`, with unit "1" unless given in
`UNITS`.
"""

from __future__ import annotations

from infertriage.diagnose import SIGNALS, Evidence
from infertriage.schemas import Signal

HEALTHY: dict[str, float | None] = {
    "scaling.gpu_ratio": 2.0,
    "scaling.efficiency": 0.9,
    "scaling.plan_efficiency": 0.95,
    "scaling.this_is_larger": 1.0,
    "log.oom_errors": 0.0,
    "log.engine_stuck_s": 0.0,
    "log.requests": 200.0,
    "log.cache_misses": 0.0,
    "log.cache_miss_share": 0.0,
    "log.cache_miss_tokens": 0.0,
    "log.context_shifts": 0.0,
    "log.collective_timeouts": 0.0,
    "log.engine_deaths": 0.0,
    "log.rejected": 0.0,
    "log.deferred": 0.0,
    "log.aborted": 0.0,
    "log.aborted_burst": 0.0,
    "log.prefill_only_share": 0.0,
    "log.prompts_over_limit": 0.0,
    "log.prompt_limit_tokens": 8192.0,
    "log.kv_cache_short": 0.0,
    "queue.waiting_share": 0.0,
    "pd.kv_transfer_mean_s": 0.005,
    "pd.kv_transfer_p95_s": 0.01,
    "pd.kv_transfer_failures": 0.0,
    "fleet.replicas": 1.0,
    "fleet.imbalance": 1.0,
    "client.ttft_p50_s": 0.05,
    "client.ttft_p95_s": 0.12,
    "client.itl_p50_s": 0.01,
    "client.itl_p95_s": 0.02,
    "client.itl_cv": 0.3,
    "client.throughput_tok_s": 3000.0,
    "client.error_rate": 0.0,
    "client.num_requests": 400.0,
    "client.num_errors": 0.0,
    "client.rejected_rate": 0.0,
    "client.admission_rate": 0.0,
    "client.timeout_rate": 0.0,
    "client.stream_cut_fraction": 0.0,
    "client.stream_cut_at_s": 0.0,
    "client.bound": 0.0,
    "client.max_concurrency": 64.0,
    "client.mean_prompt_tokens": 600.0,
    "client.mean_output_tokens": 250.0,
    "client.shared_prefix_fraction": 0.0,
    "server.ttft_p50_s": 0.04,
    "server.ttft_p95_s": 0.1,
    "server.ttft_mean_s": 0.05,
    "server.itl_p50_s": 0.01,
    "server.itl_p95_s": 0.02,
    "server.queue_time_mean_s": 0.005,
    "server.prefill_time_mean_s": 0.02,
    "server.step_tokens_max": 8192.0,
    "server.steps_per_s": 50.0,
    "server.restarts": 0.0,
    "queue.waiting_max": 0.0,
    "queue.waiting_slope": 0.0,
    "queue.running_max": 64.0,
    # one engine: no data-parallel ranks to compare (DP_EVEN has two, evenly loaded)
    "dp.ranks": 1.0,
    "dp.imbalance": None,
    "dp.rank_running_max": None,
    "dp.busiest_rank": None,
    "dp.busiest_running": None,
    "dp.busiest_waiting": None,
    "dp.busiest_kv_usage": None,
    "dp.idlest_rank": None,
    "dp.idlest_running": None,
    "dp.idlest_waiting": None,
    "dp.idlest_kv_usage": None,
    # a run without an overload step: the maxima above are the measured level's own
    "queue.measured_waiting_max": None,
    "queue.measured_running_max": None,
    "kv.usage_max": 0.4,
    "kv.usage_mean": 0.2,
    "kv.usage_after_drain": 0.0,
    "kv.usage_idle_slope": 0.0,
    "preemptions.total": 0.0,
    "prefix_cache.hit_rate": 0.0,
    "spec.acceptance_rate": 0.8,
    "spec.mean_accepted_tokens": 2.5,
    "spec.acceptance_decay": 0.7,
    "spec.num_draft_tokens": 3.0,
    "config.max_num_seqs": 256.0,
    "config.num_gpu_blocks": 28000.0,
    "config.block_size": 16.0,
    "config.gpu_memory_utilization": 0.9,
    "config.max_model_len": 8192.0,
    "config.max_num_batched_tokens": 8192.0,
    "config.cuda_graphs": 1.0,
    "config.tensor_parallel": 2.0,
    "config.data_parallel": 1.0,
    "config.pipeline_parallel": 1.0,
    "config.kv_cache_tokens": 448000.0,
    "config.interconnect_pcie": 0.0,
    "gpu.util_mean": 0.7,
    "gpu.sm_active_mean": 0.6,
    "gpu.tensor_active_mean": 0.3,
    "gpu.dram_active_mean": 0.5,
    "gpu.pcie_utilization": 0.01,
    "gpu.xid_errors": 0.0,
    "gpu.prof_fields_present": 1.0,
    "gpu.fb_used_fraction": 0.88,
    # expert and pipeline parallelism: a dense model over two even TP GPUs, no EPLB
    "config.expert_parallel": 1.0,
    "ep.balancedness_mean": None,
    "ep.balancedness_worst": None,
    "ep.hot_rank_ratio": None,
    "gpu.count": 2.0,
    "gpu.busy_by_gpu_mean": 0.7,
    "gpu.busy_by_gpu_max": 0.7,
    "gpu.busy_by_gpu_min": 0.7,
    "pp.requests_in_flight": 40.0,
    "trace.short_kernel_fraction": 0.1,
    "trace.gpu_idle_fraction": 0.05,
    "trace.memcpy.pageable_fraction": 0.0,
    "trace.memcpy_fraction": 0.001,
    "trace.launch_gap_fraction": 0.05,
    "trace.kernels_per_step": 300.0,
    "trace.cuda_graph_fraction": 0.9,
    "trace.attention_unfused": 0.0,
    "trace.recompilations": 0.0,
    "trace.host_wait_fraction": 0.05,
    "trace.syncs_per_step": 0.0,
    "trace.nccl_fraction": 0.05,
    "trace.comm_overlap_fraction": 0.5,
    "trace.rank_skew_fraction": 0.02,
    "trace.step_cpu_gap_fraction": 0.05,
    "proc.frontend_thread_cpu": 0.3,
    "proc.engine_thread_cpu": 0.5,
    "proc.frontend_cpu": 0.3,
    "proc.engine_apart": 0.0,
    "proc.engine_cpu": 0.6,
    "proc.frontend_cpu_per_token_s": 60e-6,
    "host.cpu_mean": 0.4,
    "host.server_local": 0.0,
    "host.cores": 16.0,
    "host.run_queue_per_core": 0.3,
    "host.client_cpu_cores": 0.5,
    "host.other_cpu_share": 0.1,
    "proc.cpu_wait_share": 0.02,
    "plan.decode_itl_roofline_s": 0.008,
    "plan.throughput_roofline_tok_s": 4000.0,
    "plan.memory_headroom": 0.2,
    "plan.tokens_per_request": 800.0,
    "plan.decode_batch": 64.0,
    "plan.smallest_tp_that_fits": 2.0,
}


# two data-parallel ranks of 32 running each, nothing waiting: the overrides of a DP server
DP_EVEN: dict[str, float] = {
    "dp__ranks": 2.0,
    "dp__imbalance": 1.0,
    "dp__rank_running_max": 32.0,
    "dp__busiest_rank": 0.0,
    "dp__busiest_running": 32.0,
    "dp__busiest_waiting": 0.0,
    "dp__busiest_kv_usage": 0.4,
    "dp__idlest_rank": 1.0,
    "dp__idlest_running": 32.0,
    "dp__idlest_waiting": 0.0,
    "dp__idlest_kv_usage": 0.4,
}

UNITS = {"artefact.fraction_above_one:kv.usage": "fraction"}


def _unit(name: str) -> str:
    return SIGNALS[name].unit if name in SIGNALS else UNITS.get(name, "1")


def make_evidence(**overrides: float | None) -> Evidence:
    values: dict[str, float | None] = dict(HEALTHY)
    for key, value in overrides.items():
        values[key.replace("__", ".")] = value
    signals = [
        Signal(name=name, value=value, unit=_unit(name), source="test")
        for name, value in values.items()
        if value is not None
    ]
    return Evidence.of(signals)
