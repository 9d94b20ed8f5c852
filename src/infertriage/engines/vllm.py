"""engines, level 0½: the vLLM adapter — every vLLM-specific fact.

Its `/metrics` names (V1 names first, then the V0 ones: vLLM renamed
`gpu_cache_usage_perc` → `kv_cache_usage_perc`, `time_per_output_token_seconds`
→ `inter_token_latency_seconds`, `gpu_prefix_cache_*` → `prefix_cache_*`; the
newer name wins when a server exports both, and the status notes the other);
`/version`; `max_model_len` in its `/v1/models` cards and `/tokenize`
answers; `vllm:cache_config_info`; its log's stats lines (V1 `Running: N
reqs, Waiting: M reqs, GPU KV cache usage: X%`, V0 `… Swapped: S reqs,
Pending: M reqs …`, with their throughputs), its `SpecDecoding metrics` lines,
`MM-DD HH:MM:SS` stamps (local time, no year), where a record starts (to
split two glued on one line) and V0's preemption warnings; and its flags.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from infertriage.engines.base import (
    AttentionFallback,
    Endpoint,
    EngineAdapter,
    EventKind,
    HostRoles,
    Knob,
    LogEvent,
    LogFormat,
    MetricLookup,
    SaidLimit,
    SpecLine,
    StatsLine,
    TokenizeForm,
    as_int,
    config_fields,
    positive,
    typed_label,
)
from infertriage.engines.metrics import (
    ENGINE_DOMAIN,
    PD_DOMAIN,
    MetricTable,
    Product,
    Source,
    metric,
)

__all__ = [
    "CACHE_CONFIG_INFO",
    "TOKENIZE_PATH",
    "VLLM",
    "VLLM_METRICS",
    "limit_from_tokenize",
    "token_count",
    "tokenize_body",
]

_V0 = "vLLM V0 name"
_SPEC = "exported only with speculative decoding on (--speculative-config)"
# vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py, `NixlPromMetrics` (vLLM
# 0.11+, commit 002a1057): per engine (labels model_name, engine). The transfer histograms and
# failures are recorded by the side that reads the KV (the decode instance pulls it: READ);
# `nixl_num_kv_expired_reqs` (added later, PR #32340) by the prefill instance, whose KV waited
# for a decode that never read it. Buckets: xfer time 5 ms … 5 s, post time 1 ms … 5 s, bytes
# 2 KiB … 8 GiB (×4), descriptors 10 … 50,000. Counters carry `_total` on the wire.
_NIXL = 'only with --kv-transfer-config \'{"kv_connector":"NixlConnector",…}\' (P/D)'

# Issue 33, a KV offload tier or connector. V1 `loggers.py` (`PrometheusStatLogger`, vLLM
# main, late 2025) always serves the connector's prefix-cache counters (queries: the prompt
# tokens the GPU cache missed, per admission; hits: the tokens the connector gave, from
# `scheduler.py`) and `prompt_tokens_by_source` (`PromptTokenStats`, `v1/metrics/stats.py`).
# The native CPU offloading connector (`--kv-offloading-size`, `OffloadPromMetrics` in
# `kv_connector/v1/offloading_connector.py`) adds bytes and seconds per `transfer_type`
# (`CPU_to_GPU` = load, `GPU_to_CPU` = store; mediums from `kv_offload` specs); newer main
# dual-writes flat `kv_offload_{load,store}_{bytes,time}` (its offloading-connector test).
# LMCache's own gauge (`lmcache/observability.py`) is served on the same endpoint.
_OFFLOAD_ON = "with a KV connector: --kv-offloading-size N (native CPU) or --kv-transfer-config"
_LOAD, _STORE = (("transfer_type", "CPU_to_GPU"),), (("transfer_type", "GPU_to_CPU"),)
_OFFLOAD = (
    metric("prefix_cache.external_queries", "vllm:external_prefix_cache_queries_total"),
    metric("prefix_cache.external_hits", "vllm:external_prefix_cache_hits_total"),
    metric(
        "tokens.prompt_computed",
        Source("vllm:prompt_tokens_by_source_total", where=(("source", "local_compute"),)),
    ),
    metric(
        "tokens.prompt_local_hit",
        Source("vllm:prompt_tokens_by_source_total", where=(("source", "local_cache_hit"),)),
    ),
    metric(
        "tokens.prompt_external",
        Source("vllm:prompt_tokens_by_source_total", where=(("source", "external_kv_transfer"),)),
    ),
    metric(
        "kv.offload_load_bytes",
        "vllm:kv_offload_load_bytes_total",
        Source("vllm:kv_offload_total_bytes_total", where=_LOAD, note="until late 2025"),
        enable=_OFFLOAD_ON,
    ),
    metric(
        "kv.offload_store_bytes",
        "vllm:kv_offload_store_bytes_total",
        Source("vllm:kv_offload_total_bytes_total", where=_STORE, note="until late 2025"),
        enable=_OFFLOAD_ON,
    ),
    metric(
        "kv.offload_load_seconds",
        "vllm:kv_offload_load_time_total",
        Source("vllm:kv_offload_total_time_total", where=_LOAD, note="until late 2025"),
        enable=_OFFLOAD_ON,
    ),
    metric(
        "kv.offload_store_seconds",
        "vllm:kv_offload_store_time_total",
        Source("vllm:kv_offload_total_time_total", where=_STORE, note="until late 2025"),
        enable=_OFFLOAD_ON,
    ),
    metric("kv.offload_used_bytes", "lmcache:local_cache_usage", enable="LMCache only"),
)
_EPLB = "exported only with expert parallelism and --enable-eplb (vLLM main, 2026)"

VLLM_METRICS = MetricTable(
    engine="vllm",
    title="vLLM",
    prefixes=("vllm:",),
    domain=ENGINE_DOMAIN | PD_DOMAIN,
    mappings=(
        metric("queue.waiting", "vllm:num_requests_waiting"),
        metric("queue.running", "vllm:num_requests_running"),
        metric("queue.swapped", "vllm:num_requests_swapped", note="V0 only; V1 never swaps"),
        metric("server.queue_time", "vllm:request_queue_time_seconds"),
        metric("server.prefill_time", "vllm:request_prefill_time_seconds"),
        metric("server.decode_time", "vllm:request_decode_time_seconds"),
        metric("server.inference_time", "vllm:request_inference_time_seconds"),
        metric("server.step_tokens", "vllm:iteration_tokens_total"),
        metric(
            "kv.usage", "vllm:kv_cache_usage_perc", Source("vllm:gpu_cache_usage_perc", note=_V0)
        ),
        metric("kv.blocks_total", Source("vllm:cache_config_info", from_label="num_gpu_blocks")),
        metric("kv.block_size", Source("vllm:cache_config_info", from_label="block_size")),
        metric("preemptions", "vllm:num_preemptions_total"),
        metric(
            "prefix_cache.queries",
            "vllm:prefix_cache_queries_total",
            Source("vllm:gpu_prefix_cache_queries_total", note="early V1 name"),
            enable="on with --enable-prefix-caching (V1's default)",
        ),
        metric(
            "prefix_cache.hits",
            "vllm:prefix_cache_hits_total",
            Source("vllm:gpu_prefix_cache_hits_total", note="early V1 name"),
            enable="on with --enable-prefix-caching (V1's default)",
        ),
        metric("prefix_cache.hit_rate", Source("vllm:gpu_prefix_cache_hit_rate", note=_V0)),
        metric("tokens.prompt", "vllm:prompt_tokens_total"),
        metric("tokens.generation", "vllm:generation_tokens_total"),
        metric("tokens.prompt_rate", Source("vllm:avg_prompt_throughput_toks_per_s", note=_V0)),
        metric(
            "tokens.generation_rate",
            Source("vllm:avg_generation_throughput_toks_per_s", note=_V0),
        ),
        metric("requests.finished", "vllm:request_success_total"),
        metric("server.ttft", "vllm:time_to_first_token_seconds"),
        metric(
            "server.itl",
            "vllm:inter_token_latency_seconds",
            Source("vllm:time_per_output_token_seconds", note=_V0),
        ),
        metric("server.tpot", "vllm:request_time_per_output_token_seconds"),
        metric("server.e2e", "vllm:e2e_request_latency_seconds"),
        metric("server.prompt_len", "vllm:request_prompt_tokens"),
        metric("server.output_len", "vllm:request_generation_tokens"),
        metric("spec.drafts", "vllm:spec_decode_num_drafts_total", enable=_SPEC),
        metric("spec.draft_tokens", "vllm:spec_decode_num_draft_tokens_total", enable=_SPEC),
        metric("spec.accepted_tokens", "vllm:spec_decode_num_accepted_tokens_total", enable=_SPEC),
        metric(
            "spec.accepted_tokens_per_pos",
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            enable=_SPEC,
        ),
        metric("kv_transfer.time", "vllm:nixl_xfer_time_seconds", enable=_NIXL),
        metric("kv_transfer.post_time", "vllm:nixl_post_time_seconds", enable=_NIXL),
        metric("kv_transfer.bytes", "vllm:nixl_bytes_transferred", enable=_NIXL),
        metric("kv_transfer.descriptors", "vllm:nixl_num_descriptors", enable=_NIXL),
        metric("kv_transfer.failed", "vllm:nixl_num_failed_transfers_total", enable=_NIXL),
        metric(
            "kv_transfer.failed_notifications",
            "vllm:nixl_num_failed_notifications_total",
            enable=_NIXL,
        ),
        metric(
            "kv_transfer.expired",
            "vllm:nixl_num_kv_expired_reqs_total",
            note="counted on the prefill instance",
            enable=_NIXL + "; newer vLLM only",
        ),
        metric("proc.rss_bytes", "process_resident_memory_bytes"),
        metric("proc.start_time_s", "process_start_time_seconds"),
        metric("proc.cpu_seconds", "process_cpu_seconds_total"),
        *_OFFLOAD,
        # expert parallelism (EPLB): vllm/distributed/eplb/metrics.py `EplbProm` (vLLM main,
        # 2026), per layer avg/max of the EP ranks' tokens; older releases only log it
        # (eplb_state.py "EPLB step: avg_tokens=…, max_tokens=…, balancedness=…", with
        # --eplb-config '{"log_balancedness": true}')
        metric("ep.balancedness_min", "vllm:eplb_balancedness_min", enable=_EPLB),
        metric("ep.balancedness_avg", "vllm:eplb_balancedness_avg", enable=_EPLB),
        metric("ep.rearrangements", "vllm:eplb_rearrangements_total", enable=_EPLB),
    ),
    unsupported={
        "kv_transfer.speed": "vLLM's NIXL connector exports bytes and time per transfer instead",
        "kv_transfer.latency": "vLLM's NIXL connector exports a histogram (kv_transfer.time)",
        "kv_transfer.bootstrap_time": "vLLM's NIXL connector exports no handshake time",
        "kv_transfer.alloc_time": "vLLM exports no wait for decode KV space",
        "kv_transfer.last_bytes": "vLLM's NIXL connector exports a histogram (kv_transfer.bytes)",
        "kv_transfer.bootstrap_failed": "vLLM counts failed transfers (kv_transfer.failed)",
        "pd.prefill_bootstrap_queue": "vLLM has no P/D queues of its own",
        "pd.prefill_inflight_queue": "vLLM has no P/D queues of its own",
        "pd.decode_prealloc_queue": "vLLM has no P/D queues of its own",
        "pd.decode_transfer_queue": "vLLM has no P/D queues of its own",
        "requests.failed": "vLLM counts no failed requests (aborts appear as finished_reason)",
        "kv.blocks_free": "vLLM exports usage as a fraction (kv.usage), not free blocks",
        "kv.blocks_used": "vLLM exports usage as a fraction (kv.usage), not used blocks",
        "kv.tokens_used": "vLLM exports usage as a fraction (kv.usage), not tokens",
        "server.batch_size": "vLLM exports tokens per step (server.step_tokens) and queue.running",
        "spec.accept_length": "derive it from spec.accepted_tokens / spec.drafts",
    },
    notes=("vLLM's process_* metrics describe the API-server process, not the engine core.",),
    products=(Product("kv.tokens_total", "kv.blocks_total", "kv.block_size"),),
    # V1 `PrometheusStatLogger`: labelnames ["model_name", "engine"], one engine per DP rank
    rank_label="engine",
    # vLLM names no role itself: a P/D deployment's pods carry one (llm-d's `llm-d.ai/role`,
    # relabelled `llm_d_ai_role`; others `role`, or `engine_type` as SGLang names it)
    role_labels=("engine_type", "llm_d_ai_role", "role"),
)


CACHE_CONFIG_INFO = "vllm:cache_config_info"  # an info metric: the cache's settings as labels
TOKENIZE_PATH = "/tokenize"  # POST {"model", "prompt"}: its answer carries max_model_len


def _read_version(document: Mapping[str, Any], found: dict[str, Any]) -> None:
    found["version"] = document.get("version")


def _read_card(card: Mapping[str, Any]) -> SaidLimit | None:
    length = positive(card.get("max_model_len"))
    return SaidLimit(length, "/v1/models max_model_len") if length is not None else None


def tokenize_body(model: str | None, fields: Mapping[str, object]) -> dict[str, object]:
    """A `/tokenize` body: the model and a prompt (`prompt`) or a chat (`messages`)."""
    return {"model": model, **fields}


def token_count(document: Any) -> int | None:
    """The `count` of a `/tokenize` answer (a negative one is no answer)."""
    count = document.get("count") if isinstance(document, dict) else None
    valid = isinstance(count, int) and not isinstance(count, bool) and count >= 0
    return count if valid else None


def limit_from_tokenize(document: Any) -> SaidLimit | None:
    """The `max_model_len` of a `/tokenize` answer."""
    length = positive(document.get("max_model_len")) if isinstance(document, dict) else None
    return SaidLimit(length, "/tokenize max_model_len") if length is not None else None


def config_in_metrics(scrape: MetricLookup) -> dict[str, object]:
    """The cache's settings `vllm:cache_config_info` carries as labels."""
    info = scrape.get(CACHE_CONFIG_INFO)
    if not info:
        return {}
    cache = {key: typed_label(value) for key, value in info[0].labels}
    utilization = cache.get("gpu_memory_utilization")
    prefix = cache.get("enable_prefix_caching")
    return {
        "cache_config_info": cache,
        "num_gpu_blocks": as_int(cache.get("num_gpu_blocks")),
        "block_size": as_int(cache.get("block_size")),
        "gpu_memory_utilization": float(utilization)
        if isinstance(utilization, int | float) and not isinstance(utilization, bool)
        else None,
        "enable_prefix_caching": prefix if isinstance(prefix, bool) else None,
    }


# V1 (0.8–0.11 `loggers.py`): "Engine 000: Avg prompt throughput: 812.3 tokens/s, Avg
# generation throughput: 95.0 tokens/s, Running: 16 reqs, Waiting: 7 reqs, GPU KV cache usage:
# 81.5%, Prefix cache hit rate: 12.5%"; V0 (0.6 `metrics.py`): "… Running: 64 reqs, Swapped: 0
# reqs, Pending: 12 reqs, GPU KV cache usage: 99.2%, CPU KV cache usage: 0.0%."; V1 before
# 0.8 printed no KV usage.
_STATS = re.compile(
    r"(?:Engine (?P<index>\d+): )?(?:Avg prompt throughput: (?P<prompt>[\d.]+) tokens/s, "
    r"Avg generation throughput: (?P<gen>[\d.]+) tokens/s, )?"
    r"Running: (?P<running>\d+) reqs, (?:Swapped: \d+ reqs, )?"
    r"(?P<queue>Waiting|Pending): (?P<waiting>\d+) reqs"
    r"(?:, (?:GPU )?KV cache usage: (?P<kv>[\d.]+)%)?"
    r"(?:, Prefix cache hit rate: (?P<hit>[\d.]+)%)?"
)
# "(APIServer pid=7) INFO 12-02 16:31:45 [loggers.py:123] …", the process prefix optional
_TIME = re.compile(
    r"^(?:\([^)]*\)\s*)?(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\s+(\d\d)-(\d\d) (\d\d:\d\d:\d\d)"
)
# the same, anywhere: a record glued to the one before it starts here
_RECORD = re.compile(
    r"(?:\([^()\n]*pid=\d+\)\s*)?(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d"
)
# V1 `spec_decode/metrics.py`: 0.9+ "SpecDecoding metrics: Mean acceptance length: 2.41,
# Accepted throughput: …, Drafted throughput: …, Accepted: 1234 tokens, Drafted: 2880 tokens,
# Per-position acceptance rate: 0.712, 0.455, 0.244, Avg Draft acceptance rate: 42.8%";
# 0.8 "SpecDecoding metrics: Draft acceptance rate: 42.8%, Accepted: …, Drafted: … tokens"
_SPEC_LENGTH = re.compile(r"Mean acceptance length: (?P<v>[\d.]+)")
_SPEC_ACCEPTED = re.compile(r"\bAccepted: (?P<v>\d+) tokens")
_SPEC_DRAFTED = re.compile(r"\bDrafted: (?P<v>\d+) tokens")
_SPEC_RATE = re.compile(r"Draft acceptance rate: (?P<v>[\d.]+)%")
# V0 `spec_decode/metrics.py`: "Speculative metrics: Draft acceptance rate: 0.651, System
# efficiency: 0.412, Number of speculative tokens: 5, Number of accepted tokens: 1234, …"
_SPEC_V0_RATE = re.compile(r"Speculative metrics: Draft acceptance rate: (?P<v>[\d.]+)(?![\d.]*%)")
_SPEC_POSITIONS = re.compile(r"Per-position acceptance rate: (?P<v>[\d.]+(?:, [\d.]+)*)")


def _number(pattern: re.Pattern[str], line: str) -> float | None:
    found = pattern.search(line)
    return float(found.group("v")) if found else None


def _read_stats(line: str) -> StatsLine | None:
    found = _STATS.search(line) if "Running: " in line else None  # most lines are not stats
    if not found:
        return None
    engine = "vllm-v0" if found.group("queue") == "Pending" else "vllm"

    def value(name: str, scale: float = 1.0) -> float | None:
        text = found.group(name)
        return None if text is None else float(text) * scale

    return StatsLine(
        engine,
        value("kv", 0.01),
        float(found.group("running")),
        float(found.group("waiting")),
        prompt_tok_s=value("prompt"),
        gen_tok_s=value("gen"),
        prefix_hit_rate=value("hit", 0.01),
        engine_index=None if found.group("index") is None else int(found.group("index")),
    )


def _read_spec(line: str) -> SpecLine | None:
    """A `SpecDecoding metrics:` line — or the part of one a paste wrapped onto a line of its
    own ("…, Avg Draft acceptance rate: 4.4%"): its figures are the line's, whatever its start."""
    if "SpecDecoding metrics: " not in line and "acceptance rate: " not in line:
        return None
    accepted, drafted = _number(_SPEC_ACCEPTED, line), _number(_SPEC_DRAFTED, line)
    positions = _SPEC_POSITIONS.search(line)
    percent = _number(_SPEC_RATE, line)
    fraction = _number(_SPEC_V0_RATE, line)  # V0 states a fraction, not a percentage
    rate = percent / 100.0 if percent is not None else fraction
    length = _number(_SPEC_LENGTH, line)
    if rate is None and length is None and accepted is None and not positions:
        return None  # a line that only names the rate (no figure we read)
    return SpecLine(
        mean_acceptance_length=length,
        accepted_tokens=None if accepted is None else int(accepted),
        drafted_tokens=None if drafted is None else int(drafted),
        per_position=tuple(float(v) for v in positions.group("v").split(", ")) if positions else (),
        acceptance_rate=rate,
    )


# Start-up lines that state the configuration: V1 `core.py` / `kv_cache_utils.py` (0.8–0.11)
# "GPU KV cache size: 1,234,560 tokens", "Maximum concurrency for 4,096 tokens per request:
# 12.34x"; V0 `executor_base.py` "# GPU blocks: 7466, # CPU blocks: 2048" (0.4–0.6, "# cuda
# blocks" later); `llm_engine.py` "Initializing a V1 LLM engine (v0.9.1) with config: model=…,
# max_seq_len=4096, … tensor_parallel_size=2, pipeline_parallel_size=1, … enforce_eager=False";
# `arg_utils`/`api_server.py` 0.10+ "non-default args: {'max_num_seqs': 8, …}".
_KV_TOKENS = re.compile(r"GPU KV cache size: (?P<v>[\d,]+) tokens")
_GPU_BLOCKS = re.compile(r"# (?:GPU|cuda|CUDA) blocks: (?P<v>\d+)")
_CONFIG_FIELD = re.compile(
    r"\b(?P<k>max_seq_len|max_model_len|tensor_parallel_size|pipeline_parallel_size|"
    r"data_parallel_size|max_num_seqs|max_num_batched_tokens|gpu_memory_utilization|"
    r"block_size|enforce_eager)['\"]?\s*[=:]\s*(?P<v>[\w.]+)"
)
_CONFIG_KEYS = {
    "max_seq_len": "max_model_len",
    "max_model_len": "max_model_len",
    "tensor_parallel_size": "tensor_parallel",
    "pipeline_parallel_size": "pipeline_parallel",
    "data_parallel_size": "data_parallel",
    "max_num_seqs": "max_num_seqs",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "block_size": "block_size",
}


# V0 `scheduler.py` (0.4–0.7): "Input prompt (2501 tokens) is too long and exceeds limit of
# 2048" — the request is ignored; its limit is min(max_model_len, max_num_batched_tokens).
# `kv_cache_utils.py` / `worker.py` at start-up: "The model's max seq len (30000) is larger than
# the maximum number of tokens that can be stored in KV cache (3984). Try increasing
# `gpu_memory_utilization` …" — the engine does not start (the figure may wrap to the next line);
# V1 "Maximum concurrency for 32,768 tokens per request: 0.45x".
_OVER_LIMIT = re.compile(
    r"Input prompt \((?P<n>\d+) tokens\) is too long and exceeds limit of (?P<l>\d+)"
)
_KV_SHORT = re.compile(
    r"max seq len \((?P<len>\d+)\) is larger than the maximum number of tokens that can be "
    r"stored in KV cache(?: \((?P<kv>\d+)\))?"
)
_CONCURRENCY = re.compile(
    r"Maximum concurrency for (?P<len>[\d,]+) tokens per request: (?P<x>[\d.]+)x"
)


def _count(text: str) -> float:
    """ "1,234,560" → 1234560.0"""
    return float(text.replace(",", ""))


def _limits(line: str) -> tuple[LogEvent, ...]:
    """A prompt refused over the scheduler's limit; a KV cache smaller than one request."""
    if "is too long and exceeds limit" in line and (over := _OVER_LIMIT.search(line)):
        values = {"prompt_tokens": _count(over.group("n")), "limit": _count(over.group("l"))}
        return (LogEvent(EventKind.REJECTED, values),)
    if "No available memory for the cache blocks" in line:  # V1 start-up: no KV cache at all
        return (LogEvent(EventKind.CONFIG, {"kv_cache_short": 1.0}),)
    if "stored in KV cache" in line and (short := _KV_SHORT.search(line)):
        said = {"max_model_len": _count(short.group("len")), "kv_cache_short": 1.0}
        if short.group("kv"):
            said["kv_cache_tokens"] = _count(short.group("kv"))
        return (LogEvent(EventKind.CONFIG, said),)
    if "Maximum concurrency for" in line and (most := _CONCURRENCY.search(line)):
        length = _count(most.group("len"))
        kv = {"max_model_len": length, "kv_cache_tokens": round(length * float(most.group("x")))}
        return (LogEvent(EventKind.CONFIG, kv),)
    return ()


# vllm/distributed/eplb/eplb_state.py (0.10+), on EP rank 0 with `--eplb-config
# '{"log_balancedness": true}'`: "EPLB step: avg_tokens=812.50, max_tokens=2031,
# balancedness=0.4000" (a step that routed no token reads 0.0000 and says nothing)
_EPLB_STEP = re.compile(
    r"EPLB step: avg_tokens=(?P<avg>[\d.]+), max_tokens=(?P<max>\d+), "
    r"balancedness=(?P<b>[\d.]+)"
)


def _expert_balance(line: str) -> tuple[LogEvent, ...]:
    found = _EPLB_STEP.search(line)
    if not found or int(found.group("max")) == 0:
        return ()
    values = {
        "balancedness": float(found.group("b")),
        "avg_tokens": float(found.group("avg")),
        "max_tokens": float(found.group("max")),
    }
    return (LogEvent(EventKind.EXPERT_BALANCE, values),)


# vllm/attention/selector.py `which_attn_to_use` (commit 68941ee0, v0.5; the same words later
# in vllm/platforms/cuda.py, V0): "Cannot use FlashAttention-2 backend for Volta and Turing
# GPUs." (then "Using XFormers backend."), "… for dtype other than torch.float16 or
# torch.bfloat16.", "… for FP8 KV cache.", "… for block size not divisible by 16.", "… due to
# sliding window.", "… for head size %d.", "… because the vllm_flash_attn package is not
# found."; before (commit 00138596) "Cannot use FlashAttention backend for …". Each falls back
# to XFormers, a fused memory-efficient kernel. V1: vllm/attention/utils/fa_utils.py (commit
# 4d5ee6c6) "Cannot use FA version %d is not supported due to %s" (FA2's reason: "FA2 is only
# supported on devices with compute capability >= 8"), then Triton or FlexAttention serves.
_FLASH_WORDS = "Cannot use F"
_FLASH_LEFT = re.compile(
    r"Cannot use (?:FlashAttention(?:-2)? backend|FA version 2 is not supported due to) (?P<why>.*)"
)
_FLASH_WHY = (
    ("Volta and Turing", AttentionFallback.GPU),
    ("compute capability >= 8", AttentionFallback.GPU),
    ("dtype other than", AttentionFallback.DTYPE),
    ("FP8 KV cache", AttentionFallback.KV_CACHE_DTYPE),
    ("block size", AttentionFallback.BLOCK_SIZE),
    ("sliding window", AttentionFallback.SLIDING_WINDOW),
    ("head size", AttentionFallback.HEAD_SIZE),
    ("package is not found", AttentionFallback.NOT_AVAILABLE),
)


def _attention_fallback(line: str) -> tuple[LogEvent, ...]:
    found = _FLASH_LEFT.search(line)
    why = "" if found is None else found.group("why")
    reason = next((r for words, r in _FLASH_WHY if words in why), None)
    if reason is None:  # a reason these words do not name: no meaning read into it
        return ()
    values = {"reason": float(reason), "kept_fused": 1.0}
    return (LogEvent(EventKind.ATTENTION_FALLBACK, values),)


def _read_events(line: str) -> tuple[LogEvent, ...]:
    """Start-up configuration and limits (see the comments above); the rest is stats lines'."""
    if _FLASH_WORDS in line:
        return _attention_fallback(line)
    if "EPLB step: " in line:
        return _expert_balance(line)
    if "Aborted request" in line:  # the client closed the stream before the end
        return (LogEvent(EventKind.ABORTED),)
    if (
        "exceeds limit" in line
        or "KV cache" in line
        or "Maximum concurrency" in line
        or "cache blocks" in line
    ):
        limits = _limits(line)
        if limits:
            return limits
    if "KV cache size: " in line and (kv := _KV_TOKENS.search(line)):
        return (LogEvent(EventKind.CONFIG, {"kv_cache_tokens": _count(kv.group("v"))}),)
    if " blocks: " in line and (blocks := _GPU_BLOCKS.search(line)):
        return (LogEvent(EventKind.CONFIG, {"num_gpu_blocks": float(blocks.group("v"))}),)
    if "with config: " in line or "non-default args: " in line:
        values = config_fields(line, _CONFIG_FIELD, _CONFIG_KEYS, "enforce_eager")
        return (LogEvent(EventKind.CONFIG, values),) if values else ()
    return ()


def _read_stamp(line: str, year: int) -> str | None:
    found = _TIME.match(line)
    if not found:
        return None
    return f"{year}-{found.group(1)}-{found.group(2)} {found.group(3)}"


VLLM = EngineAdapter(
    name="vllm",
    title="vLLM",
    metrics=(VLLM_METRICS,),
    endpoints=(Endpoint("/version", read_config=_read_version),),
    read_card=_read_card,
    log=LogFormat(
        read_stats=_read_stats,
        read_stamp=_read_stamp,
        preempted=re.compile(r"is preempted by PreemptionMode\.\w+"),
        cumulative_preemptions=re.compile(r"total_num_cumulative_preemption=(\d+)"),
        read_spec=_read_spec,
        record_start=_RECORD,
        read_events=_read_events,
        # any record of vLLM's logger: "INFO 12-02 16:31:45 [loggers.py:123]" / "… llm_engine.py:…"
        recognises=re.compile(
            r"(?:INFO|WARNING|ERROR|DEBUG)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?\w+\.py"
            # LMCache, its KV offload connector: "[2025-07-21 22:01:18,140] LMCache INFO: …"
            r"|\] LMCache (?:INFO|DEBUG|WARNING|ERROR):"
        ),
        interval_s=10.0,  # VLLM_LOG_STATS_INTERVAL's default
        variant_titles={"vllm": "vLLM (V1)", "vllm-v0": "vLLM (V0)"},  # its two stats lines
        # V1's engine core (v1/engine/core.py), V0's engine (engine/llm_engine.py)
        started=(
            "Initializing a V1 LLM engine",
            "Initializing a V0 LLM engine",  # 0.7–0.9 on V0 (Turing and older fall back to it)
            "Initializing an LLM engine",
        ),
        fallback_words=(_FLASH_WORDS,),
        expected=(
            "vLLM stats lines (`Avg prompt throughput: …, Running: N reqs, Waiting: M reqs, "
            "GPU KV cache usage: X%`, V0 `… Pending: M reqs …`)"
        ),
    ),
    knobs={
        Knob.MAX_SEATS: "--max-num-seqs",
        Knob.TOKEN_BUDGET: "--max-num-batched-tokens",
        Knob.MEMORY_FRACTION: "--gpu-memory-utilization",
        Knob.MAX_CONTEXT: "--max-model-len",
        Knob.KV_CACHE_DTYPE: "--kv-cache-dtype",
        Knob.PREFIX_CACHING: "--enable-prefix-caching",
        Knob.TENSOR_PARALLEL: "--tensor-parallel-size",
        Knob.EAGER: "--enforce-eager",
        # an environment variable (vllm/envs.py), read by the attention selector above
        Knob.ATTENTION_BACKEND: "VLLM_ATTENTION_BACKEND",
        Knob.API_SERVERS: "--api-server-count",
        Knob.STREAM_INTERVAL: "--stream-interval",
        Knob.SKIP_TOKENIZER: "--skip-tokenizer-init",
        Knob.KV_TRANSFER: "--kv-transfer-config",
        # GiB of CPU memory for native KV offloading (vllm/config/cache.py kv_offloading_size)
        Knob.OFFLOAD_SIZE: "--kv-offloading-size",
        # vllm/engine/arg_utils.py; --enable-eplb needs --enable-expert-parallel
        Knob.EXPERT_BALANCER: "--enable-eplb",
        Knob.PIPELINE_PARALLEL: "--pipeline-parallel-size",
    },
    tokenize=TokenizeForm(
        "vllm", TOKENIZE_PATH, tokenize_body, token_count, read_limit=limit_from_tokenize
    ),
    config_in_metrics=config_in_metrics,
    # V1: the API server is the `vllm serve` process itself (one) or `VLLM::APIServer_N`
    # processes (`--api-server-count`), and detokenises in its output processor; the engine
    # core is `VLLM::EngineCore` (comm truncates it to `VLLM::EngineCor`), model execution
    # `VLLM::Worker_TPn`. V0 runs HTTP and the engine loop in one process: its threads carry
    # no such names and the engine loop is not told apart.
    host_roles=HostRoles(api_server=("apiserver",), engine_core=("engine",), worker=("worker",)),
)
