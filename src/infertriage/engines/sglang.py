"""engines, level 0½: the SGLang adapter — every SGLang-specific fact.

Its `/metrics` names (`sglang:`; older SGLang names the per-token latency
`time_per_output_token_seconds` — it observes every token, so it is the
inter-token latency; newer builds add `inter_token_latency_seconds`,
queue-time histograms and cached-token counters; all need
`--enable-metrics`); `/get_server_info` (version, `context_length`,
`max_req_input_len`, `max_running_requests`, `max_total_num_tokens`,
`disable_radix_cache`, `chunked_prefill_size`, `disable_cuda_graph`); its
log's `Decode batch. #running-req: N, #token: T, token usage: 0.12, …
#queue-req: M` lines (with their throughput, CUDA-graph flag and, with
speculative decoding, accept length) and `Prefill batch.`, stamped
`[YYYY-MM-DD HH:MM:SS]`, and its scheduler watchdog's timeout; and its flags.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from infertriage.engines.base import (
    Endpoint,
    EngineAdapter,
    EventKind,
    HostRoles,
    Knob,
    LogEvent,
    LogFormat,
    SaidLimit,
    SpecLine,
    StatsLine,
    as_int,
    config_fields,
    positive,
)
from infertriage.engines.metrics import ENGINE_DOMAIN, PD_DOMAIN, MetricTable, Source, metric

__all__ = ["SGLANG", "SGLANG_METRICS", "read_iso_stamp"]

_NEWER = "newer SGLang builds only"
_SPEC = "exported only with speculative decoding on (--speculative-algorithm)"
# python/sglang/srt/metrics/collector.py, `SchedulerMetricsCollector` (commit 00ae9c15,
# 0.5.x): the P/D queues and the last transfer's figures are gauges ("mostrecent"), the
# failures counters; the prefill scheduler sets kv_transfer_* (MB = MiB, GB/s = GiB/s, as
# scheduler computes them: bytes / 2**20, then / 1024 per second). `per_stage_req_latency_seconds`
# is a histogram with a `stage` label (schedule_batch.py `RequestStage`):
# `prefill_transfer_kv_cache` is the prefill side's wait from its forward's end to the
# transfer's end. The scheduler labels every series `engine_type` = prefill | decode |
# unified by --disaggregation-mode (scheduler_metrics_mixin.py); older builds (≤ 0.4) wrote
# "unified" whatever the mode, so their roles cannot be told from /metrics.
_PD = "only on a disaggregated instance (--disaggregation-mode prefill|decode)"
_GIB, _MIB = float(2**30), float(2**20)

# Issue 33, HiCache's host tier (`--enable-hierarchical-cache`, sized by `--hicache-ratio` or
# `--hicache-size` GB): its gauges, created only with the tier on
# (`SchedulerMetricsCollector`, python/sglang/srt/metrics/collector.py, late 2025).
_HICACHE_ON = "with --enable-hierarchical-cache"
_HICACHE = (
    metric("kv.offload_used_tokens", "sglang:hicache_host_used_tokens", enable=_HICACHE_ON),
    metric("kv.offload_total_tokens", "sglang:hicache_host_total_tokens", enable=_HICACHE_ON),
)
_EPLB = "exported only with expert parallelism and SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC=1"

SGLANG_METRICS = MetricTable(
    engine="sglang",
    title="SGLang",
    prefixes=("sglang:",),
    domain=ENGINE_DOMAIN | PD_DOMAIN,
    mappings=(
        metric("queue.waiting", "sglang:num_queue_reqs"),
        metric("queue.running", "sglang:num_running_reqs"),
        metric("kv.usage", "sglang:token_usage", note="fraction of the KV token pool in use"),
        metric("kv.tokens_used", "sglang:num_used_tokens"),
        metric(
            "prefix_cache.hit_rate",
            "sglang:cache_hit_rate",
            note="the radix cache's hit rate as SGLang computes it",
        ),
        metric("prefix_cache.hits", "sglang:cached_tokens_total", enable=_NEWER),
        metric("tokens.prompt", "sglang:prompt_tokens_total"),
        metric("tokens.generation", "sglang:generation_tokens_total"),
        metric("tokens.generation_rate", "sglang:gen_throughput"),
        metric("requests.finished", "sglang:num_requests_total", enable=_NEWER),
        metric("requests.failed", "sglang:num_aborted_requests_total", enable=_NEWER),
        metric("server.ttft", "sglang:time_to_first_token_seconds"),
        metric(
            "server.itl",
            "sglang:inter_token_latency_seconds",
            Source("sglang:time_per_output_token_seconds", note="older name, observed per token"),
        ),
        metric("server.e2e", "sglang:e2e_request_latency_seconds"),
        metric("server.queue_time", "sglang:queue_time_seconds", enable=_NEWER),
        metric("spec.accept_length", "sglang:spec_accept_length", enable=_SPEC),
        metric(
            "kv_transfer.time",
            Source(
                "sglang:per_stage_req_latency_seconds",
                where=(("stage", "prefill_transfer_kv_cache"),),
            ),
            enable=_PD + "; newer SGLang builds",
        ),
        metric("kv_transfer.failed", "sglang:num_transfer_failed_reqs_total", enable=_PD),
        metric(
            "kv_transfer.bootstrap_failed", "sglang:num_bootstrap_failed_reqs_total", enable=_PD
        ),
        metric("kv_transfer.speed", Source("sglang:kv_transfer_speed_gb_s", _GIB), enable=_PD),
        metric("kv_transfer.latency", Source("sglang:kv_transfer_latency_ms", 1e-3), enable=_PD),
        metric(
            "kv_transfer.bootstrap_time",
            Source("sglang:kv_transfer_bootstrap_ms", 1e-3),
            enable=_PD,
        ),
        metric("kv_transfer.alloc_time", Source("sglang:kv_transfer_alloc_ms", 1e-3), enable=_PD),
        metric("kv_transfer.last_bytes", Source("sglang:kv_transfer_total_mb", _MIB), enable=_PD),
        metric("pd.prefill_bootstrap_queue", "sglang:num_prefill_prealloc_queue_reqs", enable=_PD),
        metric("pd.prefill_inflight_queue", "sglang:num_prefill_inflight_queue_reqs", enable=_PD),
        metric("pd.decode_prealloc_queue", "sglang:num_decode_prealloc_queue_reqs", enable=_PD),
        metric("pd.decode_transfer_queue", "sglang:num_decode_transfer_queue_reqs", enable=_PD),
        metric("proc.rss_bytes", "process_resident_memory_bytes"),
        metric("proc.start_time_s", "process_start_time_seconds"),
        metric("proc.cpu_seconds", "process_cpu_seconds_total"),
        *_HICACHE,
        # expert parallelism: `sglang:eplb_balancedness`, a Summary by `forward_mode` on
        # moe_ep_rank 0 (srt/metrics/collector.py, SGLang 0.5, 2026), exported only with
        # SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC=1; its _sum over its _count is the mean
        metric("ep.balancedness_sum", "sglang:eplb_balancedness_sum", enable=_EPLB),
        metric("ep.balancedness_count", "sglang:eplb_balancedness_count", enable=_EPLB),
    ),
    unsupported={
        "kv_transfer.post_time": "SGLang exports no post time per transfer",
        "kv_transfer.bytes": "SGLang exports the last transfer's size (kv_transfer.last_bytes)",
        "kv_transfer.descriptors": "SGLang exports no descriptor count",
        "kv_transfer.failed_notifications": "SGLang counts failed transfers (kv_transfer.failed)",
        "kv_transfer.expired": "SGLang counts failed transfers (kv_transfer.failed)",
        "preemptions": "SGLang retracts requests instead of preempting; it logs retractions",
        "queue.swapped": "SGLang does not swap requests to CPU",
        "prefix_cache.queries": "SGLang exports the hit rate (prefix_cache.hit_rate) instead",
    },
    notes=("SGLang's metrics need --enable-metrics on the server.",),
    # the scheduler's labels: model_name, engine_type, tp_rank, pp_rank, moe_ep_rank and,
    # with --dp-size, dp_rank; the TP ranks of one DP rank share its scheduler's state
    rank_label="dp_rank",
    copy_labels=("pid", "tp_rank", "moe_ep_rank"),
    role_labels=("engine_type",),
)


def _read_info(document: Mapping[str, Any], found: dict[str, Any]) -> None:
    found["version"] = document.get("version")
    found["max_model_len"] = found.get("max_model_len") or as_int(document.get("context_length"))
    found["max_num_seqs"] = as_int(document.get("max_running_requests"))
    found["kv_tokens_total"] = as_int(document.get("max_total_num_tokens"))
    found["enable_prefix_caching"] = (
        None if "disable_radix_cache" not in document else not document["disable_radix_cache"]
    )
    found["max_num_batched_tokens"] = positive(document.get("chunked_prefill_size"))  # -1: off
    graphs_off = document.get("disable_cuda_graph")
    found["cuda_graphs"] = None if not isinstance(graphs_off, bool) else not graphs_off


def _read_limit(document: Mapping[str, Any]) -> SaidLimit | None:
    length = positive(document.get("context_length"))
    prompt = positive(document.get("max_req_input_len"))
    if length is None:
        return None
    return SaidLimit(length, "/get_server_info context_length", prompt)


# scheduler.py / scheduler_metrics_mixin.py, 0.3–0.5: "[2025-06-01 10:00:02 TP0] Decode batch.
# #running-req: 12, #token: 9000, token usage: 0.42, cuda graph: True, gen throughput
# (token/s): 455.10, #queue-req: 3" (a comma after "batch" from 0.4.4; "accept len: 2.31,
# accept rate: 0.44, " before the throughput with speculative decoding), and "Prefill batch.
# #new-seq: 4, #new-token: 2048, #cached-token: 0, token usage: 0.31, #running-req: 8,
# #queue-req: 120". It logs every `--decode-log-interval` (40) decode steps, not on a clock.
_STATS = re.compile(r"(?:Decode|Prefill) batch[.,] (?P<body>.*)")
_FIELD = re.compile(
    r"(#running-req|#queue-req|token usage|gen throughput \(token/s\)|accept len|accept rate)"
    r": (?P<value>[\d.]+)"
)
_GRAPH = re.compile(r"cuda graph: (True|False)")
_DP_RANK = re.compile(r"^\[[^\]]*\bDP(\d+)\b")
# local time, as SGLang's logger writes it; a stamp that names its zone ("…T06:49:51.43Z",
# "+02:00": TGI, Triton's ISO8601) is another engine's, read by its own adapter
_ISO_TIME = re.compile(
    r"^\[?(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(?![.,]?\d*(?:Z|[+-]\d\d:?\d\d)\b)"
)
_RECORD = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


def _fields(line: str) -> dict[str, float] | None:
    if " batch" not in line or not _STATS.search(line):  # most lines are not stats
        return None
    return {m.group(1): float(m.group("value")) for m in _FIELD.finditer(line)} or None


def _read_stats(line: str) -> StatsLine | None:
    fields = _fields(line)
    if fields is None:
        return None
    # newer builds' prefill lines say `cuda graph: False` too (a prefill never replays the
    # decode graphs): only a decode line says whether decode ran eagerly
    graph = _GRAPH.search(line) if "Decode batch" in line else None
    rank = _DP_RANK.match(line)  # DP attention: each data-parallel rank logs its own batch
    return StatsLine(
        "sglang",
        fields.get("token usage"),
        fields.get("#running-req"),
        fields.get("#queue-req"),
        gen_tok_s=fields.get("gen throughput (token/s)"),
        cuda_graph=None if graph is None else graph.group(1) == "True",
        engine_index=None if rank is None else int(rank.group(1)),
    )


# "accept rate" has had two meanings under one wording: builds from its introduction count
# the bonus token, accept len / speculative_num_draft_tokens (the verified tokens, the draft
# tree's root among them: scheduler_metrics_mixin.py at sgl-project/sglang@01bb3c8), so a
# step that accepts no draft reads 1/n; later builds count drafts only, (accept len − 1) /
# (n − 1) ("pure_draft_accepted"), as vLLM's draft acceptance rate does. Both are printed
# to two decimals.
_HALF_CENT = 0.005


def _integer_within(low: float, high: float) -> int | None:
    """The one whole number of draft tokens (2 or more) in [low, high], if only one."""
    first, last = max(2, math.ceil(low)), math.floor(min(high, 1e3))
    return first if first == last else None


def _draft_acceptance(length: float, rate: float | None) -> float | None:
    """The share of drafted tokens accepted (vLLM's meaning), from a line's accept len and
    accept rate in either of SGLang's meanings (above): accept len 1.00 is no draft accepted
    in both; otherwise the older meaning is taken only when it alone gives a whole number of
    draft tokens for the printed figures, and the rate is read as printed in every other case."""
    if rate is None:
        return None
    if length < 1.0 + _HALF_CENT:
        return 0.0
    if rate < 2 * _HALF_CENT:
        return rate
    low, high = rate - _HALF_CENT, rate + _HALF_CENT
    bonus_counted = _integer_within((length - _HALF_CENT) / high, (length + _HALF_CENT) / low)
    drafts_only = _integer_within(
        1 + (length - 1 - _HALF_CENT) / high, 1 + (length - 1 + _HALF_CENT) / low
    )
    if bonus_counted is not None and drafts_only is None:
        return min(1.0, (length - 1.0) / (bonus_counted - 1))
    return rate


def _read_spec(line: str) -> SpecLine | None:
    fields = _fields(line)
    if fields is None or "accept len" not in fields:
        return None
    return SpecLine(
        mean_acceptance_length=fields["accept len"],
        accepted_tokens=None,
        drafted_tokens=None,
        acceptance_rate=_draft_acceptance(fields["accept len"], fields.get("accept rate")),
    )


# scheduler.py: "KV cache pool is full. Retract requests. #retracted_reqs: 3, #new_token_ratio:
# 0.7000 -> 1.0000" (0.4+; "Decode out of memory happened. #retracted_reqs: …" before): running
# requests preempted back to the queue. The scheduler's start-up line (0.3–0.5):
# "max_total_num_tokens=1234567, chunked_prefill_size=8192, max_prefill_tokens=16384,
# max_running_requests=4096, context_len=32768"; `server_args=ServerArgs(… tp_size=8, dp_size=1,
# mem_fraction_static=0.88, … disable_cuda_graph=False …)`.
_RETRACTED = re.compile(r"#retracted_reqs: (?P<n>\d+)")
_SGL_CONFIG = re.compile(
    r"\b(?P<k>max_total_num_tokens|chunked_prefill_size|max_running_requests|context_len|"
    r"tp_size|dp_size|pp_size|mem_fraction_static|disable_cuda_graph|cuda_graph_max_bs)"
    r"=(?P<v>[\w.]+)"
)
_SGL_KEYS = {
    "max_total_num_tokens": "kv_cache_tokens",
    "chunked_prefill_size": "max_num_batched_tokens",
    "max_running_requests": "max_num_seqs",
    "context_len": "max_model_len",
    "tp_size": "tensor_parallel",
    "dp_size": "data_parallel",
    "pp_size": "pipeline_parallel",
    "mem_fraction_static": "gpu_memory_utilization",
    "cuda_graph_max_bs": "cuda_graph_max_batch",  # decode batches above it run eagerly
}


def _read_events(line: str) -> tuple[LogEvent, ...]:
    """Retractions (preemptions) and the start-up configuration."""
    if "#retracted_reqs" in line and (found := _RETRACTED.search(line)):
        return (LogEvent(EventKind.PREEMPTED, {"count": float(found.group("n"))}),)
    if "max_total_num_tokens=" in line or "ServerArgs(" in line:
        values = config_fields(line, _SGL_CONFIG, _SGL_KEYS, "disable_cuda_graph")
        return (LogEvent(EventKind.CONFIG, values),) if values else ()
    return ()


def read_iso_stamp(line: str, year: int) -> str | None:
    """`[YYYY-MM-DD HH:MM:SS]` (or `YYYY-MM-DDTHH:MM:SS`) at the start of a line; `year` unused."""
    del year  # the stamp carries its own
    found = _ISO_TIME.match(line)
    return f"{found.group(1)} {found.group(2)}" if found else None


SGLANG = EngineAdapter(
    name="sglang",
    title="SGLang",
    metrics=(SGLANG_METRICS,),
    endpoints=(Endpoint("/get_server_info", read_config=_read_info, read_limit=_read_limit),),
    log=LogFormat(
        read_stats=_read_stats,
        read_stamp=read_iso_stamp,
        read_spec=_read_spec,
        record_start=_RECORD,
        read_events=_read_events,
        started=("server_args=",),  # launch_server's `logger.info(f"{server_args=}")`
        # its loggers' prefix: "[2025-06-01 10:00:02 TP0]", "[… DP1 TP3]", "[… PP0 TP0 EP0]"
        recognises=re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: (?:DP|PP|TP|EP)\d+)*\]"),
        # its scheduler's watchdog: no forward step for --watchdog-timeout seconds (300) with a
        # batch running; it then dumps the stacks and quits
        stuck=re.compile(r"Scheduler watchdog timeout \(self\.watchdog_timeout=([\d.]+)"),
        expected=(
            "SGLang `Decode batch` / `Prefill batch` lines (`#running-req: N, … #queue-req: M`)"
        ),
    ),
    knobs={
        Knob.MAX_SEATS: "--max-running-requests",
        Knob.TOKEN_BUDGET: "--chunked-prefill-size",
        Knob.MEMORY_FRACTION: "--mem-fraction-static",
        Knob.MAX_CONTEXT: "--context-length",
        Knob.KV_CACHE_DTYPE: "--kv-cache-dtype",
        Knob.TENSOR_PARALLEL: "--tp-size",
        Knob.EAGER: "--disable-cuda-graph",
        Knob.CUDA_GRAPH_MAX_BATCH: "--cuda-graph-max-bs",  # decode batches above it run eager
        Knob.ATTENTION_BACKEND: "--attention-backend",
        Knob.API_SERVERS: "--tokenizer-worker-num",
        Knob.STREAM_INTERVAL: "--stream-interval",
        Knob.SKIP_TOKENIZER: "--skip-tokenizer-init",
        Knob.KV_TRANSFER: "--disaggregation-transfer-backend",
        Knob.OFFLOAD_SIZE: "--hicache-size",  # GB of host memory for HiCache (or --hicache-ratio)
        # python/sglang/srt/server_args.py
        Knob.EXPERT_BALANCER: "--enable-eplb",
        Knob.PIPELINE_PARALLEL: "--pp-size",
    },
    # the HTTP server and TokenizerManager are the main process, detokenisation runs in the
    # `sglang::detokenizer` process: both are the front end; `sglang::scheduler_TPn` runs the
    # scheduler's loop and the model
    host_roles=HostRoles(api_server=("tokenizer",), engine_core=("scheduler",)),
)
