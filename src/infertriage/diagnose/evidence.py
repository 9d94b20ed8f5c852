"""diagnose, level 3: the evidence rules read — signals by name, and the server's own settings.

Takes `Signal`s (from `analyze` over requests, metrics, traces and the plan)
and the live server configuration; gives `Evidence`, a read-only lookup by
signal name. `SIGNALS` names every signal a rule may need, its unit, and the
flag or command that collects it, so a rule that cannot run says exactly
what is missing. (One signal a finding cites, with its threshold, is a
`schemas.EvidenceItem`.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from infertriage.schemas import Signal

__all__ = ["SIGNALS", "Evidence", "SignalDef"]


@dataclass(frozen=True, slots=True)
class SignalDef:
    unit: str
    collect: str  # the flag or command that collects it
    # why it can be absent although its source was read (the server was scraped): said
    # instead of `collect`, which would send the user to a flag already given
    absent: str = ""

    def hint(self, source_read: bool) -> str:
        return self.absent if source_read and self.absent else self.collect


_LOAD = "run `infertriage diagnose --url URL` (it drives load) or `infertriage bench`"
_METRICS = "scrape the server: `--metrics-url URL/metrics`"
_DCGM = "run dcgm-exporter with the DCP profiling fields enabled and pass `--dcgm-url URL/metrics`"
_TRACE = "capture a trace: `--profile 5` (server started with a profiler dir) or `--trace FILE`"
_HOST = "run infertriage on the server's host, or pass `--server-pid PID`"
_PLAN = "give the deployment: `--model-config C --gpu G --tp N`"
_SCALING = "compare with a run of the same service at another GPU count: `--compare-run DIR`"
_LOG = "pass the server's log: `--log FILE`"
# a log was read and holds no line of this kind: engines log these only when they happen
_NO_LINE = "no line of the log says it (the engine logs it only when it happens)"
# only SGLang's decode stats lines say whether a step ran from CUDA graphs
_NO_GRAPH_LINE = (
    "no stats line of the log says whether decode ran in CUDA graphs (SGLang's `Decode "
    "batch` lines do: `cuda graph: True/False`)"
)
_FLEET = "read a fleet's replicas from Prometheus: `--prometheus URL --selector SEL`"
# vLLM observes a request's queue and prefill time when it finishes
_AT_FINISH = (
    "the server observes it when a request finishes, and no request of the measured level "
    "finished: a longer `--duration` or shorter outputs"
)
_CONFIG = "a server that reports its config (vLLM `vllm:cache_config_info`, `/v1/models`)"
_ONE_RANK = "the server runs one engine: its metrics name no data-parallel ranks"
# a P/D deployment's series name their role (SGLang `engine_type`; vLLM a pod label
# relabelled `engine_type`, `llm_d_ai_role` or `role`); collect reads `pd_role`
_NOT_PD = "no series names a prefill or decode role: the server is not disaggregated"
_NO_TRANSFER = (
    "no KV-transfer metric was scraped (vLLM's NIXL connector, SGLang's disaggregation "
    "metrics on the prefill instance)"
)
_NO_PREFIX_RANKS = "fewer than two ranks report prefix-cache counters or a hit rate"
_EPLB = (
    "serve with expert parallelism and EPLB: vLLM `--enable-eplb` (its balancedness gauges, or "
    "`--eplb-config '{\"log_balancedness\": true}'` and `--log FILE`), SGLang `--enable-eplb` "
    "with SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC=1"
)
_EPLB_OFF = "the server publishes no expert balance (EPLB off, or a build without the metric)"
_DCGM_EACH = _DCGM + ", one series per GPU of the server (every stage's)"

SIGNALS: Mapping[str, SignalDef] = MappingProxyType(
    {
        # the load client's view
        "client.ttft_p50_s": SignalDef("s", _LOAD),
        "client.ttft_p95_s": SignalDef("s", _LOAD),
        "client.itl_p50_s": SignalDef("s", _LOAD),
        "client.itl_p95_s": SignalDef("s", _LOAD),
        "client.itl_cv": SignalDef("1", _LOAD),
        "client.throughput_tok_s": SignalDef("tokens/s", _LOAD),
        "client.error_rate": SignalDef("fraction", _LOAD),
        "client.num_requests": SignalDef("requests", _LOAD),  # the error rate's denominator
        "client.num_errors": SignalDef("requests", _LOAD),  # the server's failures among them
        "client.rejected_rate": SignalDef("fraction", _LOAD),  # refused as invalid: no rule's
        "client.admission_rate": SignalDef("fraction", _LOAD),  # HTTP 429: refused for load
        "client.timeout_rate": SignalDef("fraction", _LOAD),
        "client.stream_cut_fraction": SignalDef("fraction", _LOAD),
        "client.stream_cut_at_s": SignalDef("s", _LOAD),
        "client.bound": SignalDef("bool", _LOAD),
        "client.max_concurrency": SignalDef("requests", _LOAD),
        "client.mean_concurrency": SignalDef("requests", _LOAD),  # over the throughput's window
        "client.mean_prompt_tokens": SignalDef("tokens", _LOAD),
        "client.mean_output_tokens": SignalDef("tokens", _LOAD),
        # what the client sent: prompt tokens, in whole blocks, an earlier request had sent
        "workload.prefix_reuse": SignalDef("fraction", _LOAD),
        "workload.prompts": SignalDef("requests", _LOAD),  # the prompts prefix_reuse counts
        "workload.session_prefix_reuse": SignalDef("fraction", _LOAD),
        "workload.sessions": SignalDef("sessions", _LOAD),
        # the server's view (Prometheus)
        "server.ttft_p50_s": SignalDef("s", _METRICS),
        "server.ttft_p95_s": SignalDef("s", _METRICS),
        "server.itl_p95_s": SignalDef("s", _METRICS),
        "server.queue_time_mean_s": SignalDef("s", _METRICS, _AT_FINISH),
        "server.prefill_time_mean_s": SignalDef("s", _METRICS, _AT_FINISH),
        "server.step_tokens_max": SignalDef("tokens", _METRICS),
        "server.steps_per_s": SignalDef("1/s", _METRICS),
        "server.ttft_mean_s": SignalDef("s", _METRICS),
        "server.itl_p50_s": SignalDef("s", _METRICS),
        "server.restarts": SignalDef("1", _METRICS),
        "queue.waiting_max": SignalDef("requests", _METRICS),
        "queue.waiting_slope": SignalDef("requests/s", _METRICS),
        "queue.running_max": SignalDef("requests", _METRICS),
        # data-parallel ranks, each an engine of its own (vLLM V1 `engine`, SGLang `dp_rank`)
        "dp.ranks": SignalDef("1", _METRICS),
        "dp.imbalance": SignalDef("1", _METRICS, _ONE_RANK),
        "dp.rank_running_max": SignalDef("requests", _METRICS, _ONE_RANK),
        "dp.busiest_rank": SignalDef("1", _METRICS, _ONE_RANK),
        "dp.busiest_running": SignalDef("requests", _METRICS, _ONE_RANK),
        "dp.busiest_waiting": SignalDef("requests", _METRICS, _ONE_RANK),
        "dp.busiest_kv_usage": SignalDef("fraction", _METRICS, _ONE_RANK),
        "dp.idlest_rank": SignalDef("1", _METRICS, _ONE_RANK),
        "dp.idlest_running": SignalDef("requests", _METRICS, _ONE_RANK),
        "dp.idlest_waiting": SignalDef("requests", _METRICS, _ONE_RANK),
        "dp.idlest_kv_usage": SignalDef("fraction", _METRICS, _ONE_RANK),
        # the rank list above is the most uneven role's with P/D: 1 prefill, 2 decode
        "dp.role": SignalDef("1", _METRICS, _NOT_PD),
        # prefix-cache hits per rank, and the server's (all ranks' hits over their lookups)
        "dp.prefix_hit_rate": SignalDef("fraction", _METRICS, _NO_PREFIX_RANKS),
        "dp.prefix_hit_rate_spread": SignalDef("fraction", _METRICS, _NO_PREFIX_RANKS),
        "dp.prefix_hit_rate_min": SignalDef("fraction", _METRICS, _NO_PREFIX_RANKS),
        "dp.prefix_hit_rate_max": SignalDef("fraction", _METRICS, _NO_PREFIX_RANKS),
        # prefill/decode disaggregation read from /metrics, role by role (analyze.signals
        # .disagg); the pd.kv_transfer_* figures below are the server log's
        "pd.prefill_instances": SignalDef("1", _METRICS, _NOT_PD),
        "pd.decode_instances": SignalDef("1", _METRICS, _NOT_PD),
        "pd.prefill_waiting_per_instance": SignalDef("requests", _METRICS, _NOT_PD),
        "pd.decode_waiting_per_instance": SignalDef("requests", _METRICS, _NOT_PD),
        "pd.prefill_running_per_instance": SignalDef("requests", _METRICS, _NOT_PD),
        "pd.decode_running_per_instance": SignalDef("requests", _METRICS, _NOT_PD),
        "pd.prefill_kv_usage": SignalDef("fraction", _METRICS, _NOT_PD),
        "pd.decode_kv_usage": SignalDef("fraction", _METRICS, _NOT_PD),
        "pd.prefill_queue_share": SignalDef("fraction", _METRICS, _NOT_PD),
        "pd.ttft_mean_s": SignalDef("s", _METRICS, _NOT_PD),
        "pd.transfer_time_mean_s": SignalDef("s", _METRICS, _NO_TRANSFER),
        "pd.transfer_time_p90_s": SignalDef("s", _METRICS, _NO_TRANSFER),
        "pd.transfer_ttft_share": SignalDef("fraction", _METRICS, _NO_TRANSFER),
        "pd.transfer_bytes_per_s": SignalDef("bytes/s", _METRICS, _NO_TRANSFER),
        "pd.transfer_bytes_mean": SignalDef("bytes", _METRICS, _NO_TRANSFER),
        "pd.transfer_count": SignalDef("1", _METRICS, _NO_TRANSFER),
        "pd.transfer_failures": SignalDef("1", _METRICS, _NO_TRANSFER),
        "pd.transfer_failure_share": SignalDef("fraction", _METRICS, _NO_TRANSFER),
        "pd.transfer_queue": SignalDef("requests", _METRICS, _NO_TRANSFER),
        # the measured level alone (the maxima above include the overload step)
        "queue.measured_waiting_max": SignalDef("requests", _METRICS),
        "queue.measured_running_max": SignalDef("requests", _METRICS),
        "kv.usage_max": SignalDef("fraction", _METRICS),
        "kv.usage_mean": SignalDef("fraction", _METRICS),
        "kv.usage_after_drain": SignalDef("fraction", _METRICS),
        "kv.usage_idle_slope": SignalDef("fraction/s", _METRICS),
        "preemptions.total": SignalDef("1", _METRICS),
        "prefix_cache.hit_rate": SignalDef(
            "fraction",
            _METRICS,
            "the server exports no prefix-cache counters (is prefix caching enabled?)",
        ),
        "spec.acceptance_rate": SignalDef("fraction", _METRICS),
        "spec.mean_accepted_tokens": SignalDef("tokens", _METRICS),
        "spec.acceptance_decay": SignalDef("fraction", _METRICS),
        "spec.num_draft_tokens": SignalDef("tokens", _CONFIG),
        # two runs at different GPU counts
        "scaling.gpu_ratio": SignalDef("1", _SCALING),
        "scaling.efficiency": SignalDef("fraction", _SCALING),
        "scaling.plan_efficiency": SignalDef("fraction", _SCALING),
        "scaling.this_is_larger": SignalDef("bool", _SCALING),
        # the server's own log
        "log.oom_errors": SignalDef("1", _LOG),
        "log.engine_stuck_s": SignalDef("s", _LOG + " or `infertriage logs FILE`"),
        "log.requests": SignalDef(
            "requests", _LOG, _NO_LINE
        ),  # requests the engine timed in its log
        "log.cache_misses": SignalDef("1", _LOG, _NO_LINE),  # prompts processed again from scratch
        "log.cache_miss_share": SignalDef("fraction", _LOG, _NO_LINE),  # of the requests started
        "log.cache_miss_tokens": SignalDef("tokens", _LOG, _NO_LINE),
        "log.context_shifts": SignalDef("1", _LOG, _NO_LINE),
        "log.collective_timeouts": SignalDef("1", _LOG, _NO_LINE),
        "log.engine_deaths": SignalDef("1", _LOG, _NO_LINE),
        "log.rejected": SignalDef("1", _LOG, _NO_LINE),
        "log.deferred": SignalDef("1", _LOG, _NO_LINE),
        "log.aborted": SignalDef("1", _LOG, _NO_LINE),  # requests the client left unfinished
        "log.aborted_burst": SignalDef("1", _LOG, _NO_LINE),  # the most in one second
        "log.prefill_only_share": SignalDef(
            "fraction", _LOG, _NO_LINE
        ),  # decodes paused for prefill
        "log.prompts_over_limit": SignalDef(
            "1", _LOG, _NO_LINE
        ),  # refused over the scheduler's limit
        "log.prompt_limit_tokens": SignalDef("tokens", _LOG, _NO_LINE),
        "log.kv_cache_short": SignalDef(
            "1", _LOG, _NO_LINE
        ),  # the engine: one request does not fit
        "queue.waiting_share": SignalDef("fraction", _LOG + " or `infertriage logs FILE`"),
        # decode steps outside CUDA graphs, as the engine's per-step lines say (SGLang)
        "log.eager_decode_share": SignalDef("fraction", _LOG, _NO_GRAPH_LINE),
        "log.eager_decode_batch": SignalDef("requests", _LOG, _NO_GRAPH_LINE),
        "log.eager_decode_token_s": SignalDef("s", _LOG, _NO_GRAPH_LINE),
        "log.eager_decode_step_s": SignalDef("s", _LOG, _NO_GRAPH_LINE),
        "log.eager_decode_lines": SignalDef("1", _LOG, _NO_GRAPH_LINE),
        "log.eager_decode_ranked": SignalDef("bool", _LOG, _NO_GRAPH_LINE),  # DP attention
        # the flash-attention kernel left at start-up (vLLM's selector, TGI's flash import)
        "log.attention_fallbacks": SignalDef("1", _LOG, _NO_LINE),
        "log.attention_fallback_reason": SignalDef("code", _LOG, _NO_LINE),
        "log.attention_kept_fused": SignalDef("bool", _LOG, _NO_LINE),
        "log.gpu_capability": SignalDef("1", _LOG, _NO_LINE),
        # prefill/decode disaggregation: the KV cache moved between instances
        "pd.kv_transfer_mean_s": SignalDef("s", _LOG, _NO_LINE),
        "pd.kv_transfer_p95_s": SignalDef("s", _LOG, _NO_LINE),
        "pd.kv_transfer_failures": SignalDef("1", _LOG, _NO_LINE),
        # a fleet of replicas behind one URL (Prometheus)
        "fleet.replicas": SignalDef("1", _FLEET),
        "fleet.imbalance": SignalDef("1", _FLEET),
        "fleet.busiest_excess": SignalDef("requests", _FLEET),
        "fleet.routing_chance": SignalDef("fraction", _FLEET),
        "fleet.request_imbalance": SignalDef("1", _FLEET),
        "fleet.replicas_partial": SignalDef("1", _FLEET),
        # live configuration
        "config.max_num_seqs": SignalDef("requests", _CONFIG),
        "config.num_gpu_blocks": SignalDef("1", _CONFIG),
        "config.block_size": SignalDef("tokens", _CONFIG),
        "config.gpu_memory_utilization": SignalDef("fraction", _CONFIG),
        "config.max_model_len": SignalDef("tokens", _CONFIG),
        "config.max_num_batched_tokens": SignalDef("tokens", _CONFIG),
        "config.cuda_graphs": SignalDef("bool", _CONFIG),
        "config.cuda_graph_max_batch": SignalDef("requests", _CONFIG),  # SGLang's start-up
        "config.tensor_parallel": SignalDef("1", _PLAN),
        "config.data_parallel": SignalDef("1", _CONFIG),
        "config.pipeline_parallel": SignalDef("1", _CONFIG),
        "config.expert_parallel": SignalDef("1", _CONFIG),
        "config.kv_cache_tokens": SignalDef("tokens", _CONFIG),
        "config.interconnect_pcie": SignalDef("bool", _PLAN),
        # GPU counters (DCGM)
        "gpu.util_mean": SignalDef("fraction", _DCGM),
        "gpu.sm_active_mean": SignalDef("fraction", _DCGM),
        "gpu.tensor_active_mean": SignalDef("fraction", _DCGM),
        "gpu.dram_active_mean": SignalDef("fraction", _DCGM),
        "gpu.pcie_utilization": SignalDef("fraction", _DCGM + " and give `--gpu`"),
        "gpu.xid_errors": SignalDef("1", _DCGM),
        "gpu.prof_fields_present": SignalDef("bool", _DCGM),
        "gpu.fb_used_fraction": SignalDef("fraction", _DCGM),
        # expert and pipeline parallelism (analyze.signals.parallel)
        "ep.balancedness_mean": SignalDef("fraction", _EPLB, _EPLB_OFF),
        "ep.balancedness_worst": SignalDef("fraction", _EPLB, _EPLB_OFF),
        "ep.hot_rank_ratio": SignalDef("1", _EPLB, _EPLB_OFF),
        "gpu.count": SignalDef("1", _DCGM),
        "gpu.busy_by_gpu_mean": SignalDef("fraction", _DCGM_EACH),
        "gpu.busy_by_gpu_max": SignalDef("fraction", _DCGM_EACH),
        "gpu.busy_by_gpu_min": SignalDef("fraction", _DCGM_EACH),
        "pp.requests_in_flight": SignalDef("requests", _METRICS),
        # traces
        "trace.short_kernel_fraction": SignalDef("fraction", _TRACE),
        "trace.gpu_idle_fraction": SignalDef("fraction", _TRACE),
        "trace.memcpy.pageable_fraction": SignalDef("fraction", _TRACE),
        "trace.memcpy_fraction": SignalDef("fraction", _TRACE),
        "trace.launch_gap_fraction": SignalDef("fraction", _TRACE),
        "trace.kernels_per_step": SignalDef("1", _TRACE),
        "trace.cuda_graph_fraction": SignalDef("fraction", _TRACE),
        "trace.attention_unfused": SignalDef("bool", _TRACE),
        "trace.recompilations": SignalDef("1", _TRACE),
        "trace.host_wait_fraction": SignalDef("fraction", _TRACE),
        "trace.syncs_per_step": SignalDef("1", _TRACE),
        "trace.nccl_fraction": SignalDef("fraction", _TRACE),
        "trace.comm_overlap_fraction": SignalDef("fraction", _TRACE),
        "trace.rank_skew_fraction": SignalDef("fraction", _TRACE),
        "trace.step_cpu_gap_fraction": SignalDef("fraction", _TRACE),
        # host and server process
        "proc.frontend_thread_cpu": SignalDef("fraction", _HOST),
        "proc.engine_thread_cpu": SignalDef("fraction", _HOST),
        # each role's processes and threads together (engines' `host_roles`), in cores
        "proc.frontend_cpu": SignalDef("cores", _HOST),
        "proc.engine_cpu": SignalDef("cores", _HOST),
        # the engine core runs in a process of its own, apart from the API server (vLLM V1)
        "proc.engine_apart": SignalDef("bool", _HOST),
        # the API server's CPU seconds over the output tokens the server streamed
        "proc.frontend_cpu_per_token_s": SignalDef(
            "s/token", _HOST + ", and scrape the server's generation-token counter"
        ),
        # CPU contention on the load client's host (a caveat when the server shares it)
        "host.cpu_mean": SignalDef("fraction", _LOAD),
        "host.server_local": SignalDef("bool", _LOAD),
        "host.cores": SignalDef("cores", _LOAD),
        "host.run_queue_per_core": SignalDef("threads/core", _LOAD + " on Linux"),
        "host.client_cpu_cores": SignalDef("cores", _LOAD),
        "host.other_cpu_share": SignalDef("fraction", _HOST),
        "proc.cpu_wait_share": SignalDef("fraction", _HOST + " (Linux schedstat)"),
        # the capacity plan and roofline
        "plan.decode_itl_roofline_s": SignalDef("s", _PLAN),
        "plan.throughput_roofline_tok_s": SignalDef("tokens/s", _PLAN),
        "plan.memory_headroom": SignalDef("fraction", _PLAN),
        "plan.tokens_per_request": SignalDef("tokens", _PLAN),
        "plan.decode_batch": SignalDef("requests", _PLAN),
        "plan.smallest_tp_that_fits": SignalDef("GPUs", _PLAN),
    }
)


@dataclass(frozen=True, slots=True)
class Evidence:
    """Signals by name, and the engine they came from. Rules read `get`, never raw files."""

    signals: Mapping[str, Signal] = field(default_factory=dict)
    engine: str | None = None  # as `collect.detect` names it; advice names this engine's flags

    @classmethod
    def of(cls, signals: Iterable[Signal], engine: str | None = None) -> Evidence:
        return cls({signal.name: signal for signal in signals}, engine)

    def get(self, name: str) -> float | None:
        signal = self.signals.get(name)
        return None if signal is None else signal.value

    def has(self, *names: str) -> bool:
        return all(name in self.signals for name in names)

    def signal(self, name: str) -> Signal:
        return self.signals[name]

    def merged(self, other: Iterable[Signal]) -> Evidence:
        merged = dict(self.signals)
        merged.update({signal.name: signal for signal in other})
        return Evidence(merged, self.engine)
