"""engines, level 0½: the TensorRT-LLM adapter (served by Triton or by `trtllm-serve`).

Its `/metrics` names: `TRTLLM_TRITON_METRICS` (Triton with the TensorRT-LLM
backend's `nv_trt_llm_*` metrics, or `trtllm-serve`'s `trtllm_*` ones) and
`TRITON_METRICS` (Triton's own `nv_inference_*` and `nv_gpu_*` only).
Triton's durations are cumulative microsecond counters summed over
requests, not histograms; its latency histograms
(`nv_inference_first_response_histogram_ms`) are opt-in. The batch and KV
settings the backend reports as `max` gauges, and its settings' names. Its
log: the iteration statistics (the executor's JSON, `trtllm-serve`'s
`/metrics` list, Triton's `--log-verbose` line), the PyTorch backend's
`print_iter_log` line and the `[TensorRT-LLM]` startup lines that state its
batch, token and KV-cache limits; Triton's glog stamps are UTC.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from infertriage.engines.base import (
    EngineAdapter,
    EventKind,
    Knob,
    LogEvent,
    LogFormat,
    MetricLookup,
    SpecLine,
    StatedValues,
    StatsLine,
    local_stamp_of_utc,
    stated_values,
)
from infertriage.engines.metrics import (
    ENGINE_DOMAIN,
    MetricMap,
    MetricTable,
    Product,
    Source,
    metric,
)

__all__ = [
    "KV_BLOCK_METRICS",
    "REQUEST_METRICS",
    "TRITON_METRICS",
    "TRTLLM",
    "TRTLLM_TRITON_METRICS",
]

KV_BLOCK_METRICS = ("nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type")  # family, label
REQUEST_METRICS = ("nv_trt_llm_request_metrics", "request_type")

_US = 1e-6
_MS = 1e-3
_OPT_IN = "opt-in: start tritonserver with --metrics-config histogram_latencies=true"


def _req(kind: str) -> Source:
    return Source(REQUEST_METRICS[0], where=((REQUEST_METRICS[1], kind),))


def _kv(kind: str) -> Source:
    return Source(KV_BLOCK_METRICS[0], where=((KV_BLOCK_METRICS[1], kind),))


_TRITON_COMMON: tuple[MetricMap, ...] = (
    metric("server.queue_seconds", Source("nv_inference_queue_duration_us", _US)),
    metric("server.request_seconds", Source("nv_inference_request_duration_us", _US)),
    metric("server.compute_seconds", Source("nv_inference_compute_infer_duration_us", _US)),
    metric("requests.failed", "nv_inference_request_failure"),
    metric("gpu.util", "nv_gpu_utilization"),
    metric("gpu.fb_used_bytes", "nv_gpu_memory_used_bytes"),
    metric("gpu.fb_total_bytes", "nv_gpu_memory_total_bytes"),
    metric("gpu.power_watts", "nv_gpu_power_usage"),
    metric("server.steps", "nv_inference_exec_count", note="model executions (batches)"),
)
_TRITON_GPU = frozenset({"gpu.util", "gpu.fb_used_bytes", "gpu.fb_total_bytes", "gpu.power_watts"})
_TRITON_UNSUPPORTED = {
    "preemptions": "Triton exports no preemption counter",
    "queue.swapped": "Triton does not swap requests",
}

TRTLLM_TRITON_METRICS = MetricTable(
    engine="trtllm_triton",
    title="TensorRT-LLM (Triton)",
    prefixes=("nv_trt_llm_", "trtllm_"),
    domain=ENGINE_DOMAIN | _TRITON_GPU,
    mappings=(
        metric("queue.waiting", _req("waiting"), "nv_inference_pending_request_count"),
        metric("queue.running", _req("active")),
        metric("server.batch_size", _req("scheduled"), note="requests scheduled this iteration"),
        metric("kv.usage", _kv("fraction"), "trtllm_kv_cache_utilization"),
        metric("kv.blocks_total", _kv("max")),
        metric("kv.blocks_free", _kv("free")),
        metric("kv.blocks_used", _kv("used")),
        metric("kv.block_size", _kv("tokens_per")),
        metric("prefix_cache.hit_rate", "trtllm_kv_cache_hit_rate"),
        metric("requests.finished", "trtllm_request_success_total", "nv_inference_request_success"),
        metric(
            "server.ttft",
            "trtllm_time_to_first_token_seconds",
            Source("nv_inference_first_response_histogram_ms", _MS, note=_OPT_IN),
        ),
        metric(
            "server.itl",
            "trtllm_inter_token_latency_seconds",
            "trtllm_time_per_output_token_seconds",
        ),
        metric("server.e2e", "trtllm_e2e_request_latency_seconds"),
        metric("server.queue_time", "trtllm_request_queue_time_seconds"),
        *_TRITON_COMMON,
    ),
    unsupported={
        **_TRITON_UNSUPPORTED,
        "tokens.prompt": "the TensorRT-LLM backend exports per-iteration token gauges only",
        "tokens.generation": "the TensorRT-LLM backend exports per-iteration token gauges only",
    },
    notes=(
        "nv_trt_llm_* values are of the latest iteration, not cumulative.",
        "Triton's *_duration_us are sums over requests; divide by requests for a mean.",
    ),
    products=(
        Product("kv.tokens_total", "kv.blocks_total", "kv.block_size"),
        Product("kv.tokens_used", "kv.blocks_used", "kv.block_size"),
    ),
)

TRITON_METRICS = MetricTable(
    engine="triton",
    title="Triton Inference Server",
    prefixes=("nv_inference_",),
    domain=ENGINE_DOMAIN | _TRITON_GPU,
    mappings=(
        metric("queue.waiting", "nv_inference_pending_request_count"),
        metric("requests.finished", "nv_inference_request_success"),
        metric(
            "server.ttft",
            Source("nv_inference_first_response_histogram_ms", _MS),
            enable=_OPT_IN,
        ),
        *_TRITON_COMMON,
    ),
    unsupported={
        **_TRITON_UNSUPPORTED,
        "kv.usage": "no TensorRT-LLM backend metrics (nv_trt_llm_*) in this scrape",
    },
    notes=("No LLM backend metrics: this is Triton's generic view of its models.",),
)


# The iteration statistics (`IterationStats`, cpp/include/tensorrt_llm/executor/types.h) as the
# executor serialises them (cpp/tensorrt_llm/executor/jsonSerialization.cpp, keys sorted): from
# `getLatestIterationStats()`, the LLM API's `llm.get_stats()` and `trtllm-serve`'s /metrics (a
# JSON list, one object an iteration): {"cpuMemUsage":3492,"gpuMemUsage":25330607135,
# "inflightBatchingStats":{"avgNumDecodedTokensPerIter":0.0,"microBatchId":0,
# "numContextRequests":1,"numCtxTokens":16000,"numGenRequests":0,"numPausedRequests":0,
# "numScheduledRequests":1},"iter":0,"iterLatencyMS":0.0,"kvCacheStats":{"allocNewBlocks":250,…,
# "freeNumBlocks":1745,"maxNumBlocks":7240,…,"tokensPerBlock":64,"usedNumBlocks":5495},…,
# "numActiveRequests":1,…,"numQueuedRequests":7,…,"timestamp":"04-07-2025 20:33:17.747028"}
# (NVIDIA/TensorRT-LLM#3376; the PyTorch backend writes the same keys, #6364). Nested objects
# hold no objects, and `crossKvCacheStats` / `specDecodingStats` repeat inner key names, so each
# nested object is read on its own. The Triton backend logs each iteration at --log-verbose=1
# in its own words (tensorrtllm_backend inflight_batcher_llm/src/model_instance_state.cc
# `WaitForStats`, libtensorrtllm.cc before 0.9): "I1218 03:35:37.688135 20559
# libtensorrtllm.cc:1205] {"Active Request Count":1,"Context Requests":1,"Free KV cache
# blocks":480,…,"Paused Requests":0,…,"Used KV cache blocks":1}"; Triton 24.05+ quotes the
# message, escaping its quotes.
_NUMBER = re.compile(r'\\?"([A-Za-z][A-Za-z ]*)\\?":\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\b')
_NESTED = re.compile(r'\\?"(\w+)\\?":\s*\{([^{}]*)\}')
# tensorrt_llm/_torch/pyexecutor/py_executor.py with `print_iter_log` (PyTorch backend, 0.19+):
# "[04/28/2025-09:56:44] [TRT-LLM] [I] iter = 198, global_rank = 0, rank = 0,
# currank_total_requests = 0/0, elapsed_time = 0.005060911178588867s, timestamp = 2025-04-28
# 09:56:44, num_scheduled_requests: 10, states = {'num_ctx_requests': 0, 'num_ctx_tokens': 0,
# 'num_generation_tokens': 16}" (NVIDIA/TensorRT-LLM#3914); later builds write `host_step_time =
# 12.3ms` for elapsed_time. Its num_generation_tokens counts CUDA-graph padding, so the step's
# tokens are counted as the executor's are: the context tokens plus one per generation request
# (the scheduled requests that are not context requests), where the line says all three.
_ITER_LOG = re.compile(
    r"\biter = \d+, .*?(?:elapsed_time = (?P<s>[\d.eE-]+)s|host_step_time = (?P<ms>[\d.eE-]+)ms)"
)
_SCHEDULED = re.compile(r"\bnum_scheduled_requests: (\d+)")
_ITER_STATES = re.compile(r"'(num_ctx_requests|num_ctx_tokens)': (\d+)")

# cpp/tensorrt_llm/batch_manager (trtGptModelInflightBatching.cpp, kvCacheManager.cpp), each
# line prefixed "[TensorRT-LLM][INFO] ": "TRTGptModel maxBatchSize: 8", "TRTGptModel
# maxSequenceLen: 1048576", "TRTGptModel maxNumTokens: 8192" (tensorrtllm_backend#577),
# "Number of blocks in KV cache primary pool: 17210" (tensorrtllm_backend#576), 0.18+ "Max KV
# cache blocks per sequence: 65 [window size=2051], tokens per block=32, primary blocks=116617,
# secondary blocks=0", "Number of tokens per block: 32.", "[MemUsageChange] Allocated 78.30 GiB
# for max tokens in paged KV cache (3731744)." (triton-inference-server/tutorials#150), 0.5
# "Using 10718 tokens in paged KV cache." (NVIDIA/TensorRT-LLM#224). "Max KV cache pages per
# sequence: 125" names no documented key: recognised, not read.
_CONFIG_LINES: StatedValues = (
    (re.compile(r"TRTGptModel maxBatchSize: (\d+)"), ("max_num_seqs",)),
    (re.compile(r"TRTGptModel maxSequenceLen: (\d+)"), ("max_model_len",)),
    (re.compile(r"TRTGptModel maxNumTokens: (\d+)"), ("max_num_batched_tokens",)),
    (re.compile(r"Number of blocks in KV cache primary pool: (\d+)"), ("num_gpu_blocks",)),
    (
        re.compile(r"tokens per block=(\d+), primary blocks=(\d+)"),
        ("block_size", "num_gpu_blocks"),
    ),
    (re.compile(r"Number of tokens per block: (\d+)"), ("block_size",)),
    (
        re.compile(r"Allocated [\d.]+ [KMGT]i?B for max tokens in paged KV cache \((\d+)\)"),
        ("kv_cache_tokens",),
    ),
    (re.compile(r"Using (\d+) tokens in paged KV cache"), ("kv_cache_tokens",)),
)

# Stamps. Triton's glog form (triton-inference-server/core src/logging.cc: `gmtime_r`, so UTC,
# no year): "I0410 16:58:08.485508 1 model_lifecycle.cc:849] …"; its --log-format=ISO8601 form
# "2024-04-10T16:58:08Z I model_lifecycle.cc:849] …" (UTC too); the LLM API's Python logger
# (tensorrt_llm/logger.py, local time): "[04/28/2025-09:56:44] [TRT-LLM] [I] …"; and an
# iteration's own "timestamp":"04-07-2025 20:33:17.747028" (cpp/tensorrt_llm/common/
# timestampUtils.cpp `getCurrentTimestamp`: std::localtime, "%m-%d-%Y %H:%M:%S.uuuuuu"). The
# C++ "[TensorRT-LLM][INFO]" lines carry none.
_GLOG = re.compile(r"^[IWEF](\d\d)(\d\d) (\d\d:\d\d:\d\d)\.\d{6} +\d+ [\w.-]+:\d+\]")
_TRITON_ISO = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d:\d\d:\d\d)Z [IWEF] ")
_PY_LOGGER = re.compile(r"^\[(\d\d)/(\d\d)/(\d{4})-(\d\d:\d\d:\d\d)\] \[TRT-LLM\]")
_ITER_STAMP = re.compile(r'\\?"[Tt]imestamp\\?":\s*\\?"(\d\d)-(\d\d)-(\d{4}) (\d\d:\d\d:\d\d)')

# where a record begins, to split glued ones: the next iteration of a /metrics list on one line,
# a C++ "[TensorRT-LLM][LEVEL]" line, a Python logger line
_RECORD = re.compile(
    r'(?:(?<=\},)|(?<=\}, ))\{"cpuMemUsage":'
    r"|\[TensorRT-LLM\]\[(?:INFO|WARNING|ERROR|DEBUG|VERBOSE|TRACE)\]"
    r"|\[\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d\] \[TRT-LLM\]"
)
# a TensorRT-LLM (or Triton) line at all
_RECOGNISES = re.compile(
    r"\[TensorRT-LLM\]|\[TRT-LLM\]|\"numActiveRequests\"|Active Request Count|tensorrt_?llm"
    r"|^[IWE]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [\w.-]+\.cc:\d+\]"
)


@dataclass(frozen=True, slots=True)
class _Iteration:
    """What one iteration's statistics say, in either spelling."""

    running: float | None
    waiting: float | None
    kv_usage: float | None  # used blocks over the pool's blocks
    step_s: float | None
    tokens: float | None  # context tokens plus one per generation request
    paused: float | None
    spec: SpecLine | None = None


def _numbers(text: str) -> dict[str, float]:
    return {m.group(1): float(m.group(2)) for m in _NUMBER.finditer(text)}


def _ratio(used: float | None, total: float | None) -> float | None:
    return None if used is None or not total else used / total


def _plus(a: float | None, b: float | None) -> float | None:
    return None if a is None and b is None else (a or 0.0) + (b or 0.0)


def _spec(figures: dict[str, float]) -> SpecLine | None:
    """`specDecodingStats` of an iteration that drafted."""
    drafted = figures.get("numDraftTokens")
    if not drafted:
        return None
    accepted = figures.get("numAcceptedTokens")
    return SpecLine(
        mean_acceptance_length=figures.get("acceptanceLength"),
        accepted_tokens=None if accepted is None else int(accepted),
        drafted_tokens=int(drafted),
        acceptance_rate=None if accepted is None else accepted / drafted,
    )


def _executor_iteration(line: str) -> _Iteration:
    nested = {m.group(1): _numbers(m.group(2)) for m in _NESTED.finditer(line)}
    top = _numbers(_NESTED.sub("", line))
    kv = nested.get("kvCacheStats", {})
    batch = nested.get("inflightBatchingStats", {})
    latency_ms = top.get("iterLatencyMS")
    return _Iteration(
        running=top.get("numActiveRequests"),
        waiting=top.get("numQueuedRequests"),
        kv_usage=_ratio(kv.get("usedNumBlocks"), kv.get("maxNumBlocks")),
        step_s=None if latency_ms is None else latency_ms / 1000.0,
        tokens=_plus(batch.get("numCtxTokens"), batch.get("numGenRequests")),
        paused=batch.get("numPausedRequests"),
        spec=_spec(nested.get("specDecodingStats", {})),
    )


def _triton_iteration(line: str) -> _Iteration:
    figures = _numbers(line)
    return _Iteration(
        running=figures.get("Active Request Count"),
        waiting=None,  # the backend's line has no queue; nv_trt_llm_request_metrics does
        kv_usage=_ratio(figures.get("Used KV cache blocks"), figures.get("Max KV cache blocks")),
        step_s=None,
        tokens=_plus(figures.get("Total Context Tokens"), figures.get("Generation Requests")),
        paused=figures.get("Paused Requests"),
    )


@functools.lru_cache(maxsize=64)  # read_stats, read_spec and read_events read the same line
def _iteration(line: str) -> _Iteration | None:
    """The iteration statistics a line carries, in the executor's or Triton's spelling."""
    if '"numActiveRequests' in line:
        return _executor_iteration(line)
    if "Active Request Count" in line:
        return _triton_iteration(line)
    return None


def _read_stats(line: str) -> StatsLine | None:
    found = _iteration(line)
    if found is None:
        return None
    return StatsLine(TRTLLM_TRITON_METRICS.engine, found.kv_usage, found.running, found.waiting)


def _read_spec(line: str) -> SpecLine | None:
    found = _iteration(line)
    return None if found is None else found.spec


def _step(line: str) -> tuple[LogEvent, ...]:
    """An iteration's step (and its paused requests, when there are)."""
    found = _iteration(line)
    if found is None:
        return _iter_log_step(line)
    figures = {
        "step_s": found.step_s,
        "running": found.running,
        "waiting": found.waiting,
        "kv_usage": found.kv_usage,
        "tokens": found.tokens,
    }
    step = LogEvent(EventKind.STEP, {k: v for k, v in figures.items() if v is not None})
    if not found.paused:
        return (step,)
    return step, LogEvent(EventKind.PREEMPTED, {"count": found.paused})


def _iter_log_step(line: str) -> tuple[LogEvent, ...]:
    """The PyTorch backend's `print_iter_log` line as a step."""
    if "iter = " not in line:
        return ()
    found = _ITER_LOG.search(line)
    if found is None:
        return ()
    seconds = found.group("s")
    values = {"step_s": float(seconds) if seconds else float(found.group("ms")) / 1000.0}
    scheduled = _SCHEDULED.search(line)
    if scheduled is not None:
        values["running"] = float(scheduled.group(1))
        states = {m.group(1): float(m.group(2)) for m in _ITER_STATES.finditer(line)}
        if len(states) == 2:
            generating = values["running"] - states["num_ctx_requests"]
            values["tokens"] = states["num_ctx_tokens"] + generating
    return (LogEvent(EventKind.STEP, values),)


def _config(line: str) -> tuple[LogEvent, ...]:
    if "TensorRT-LLM]" not in line:
        return ()
    values = stated_values(line, _CONFIG_LINES)
    return (LogEvent(EventKind.CONFIG, values),) if values else ()


def _read_events(line: str) -> tuple[LogEvent, ...]:
    """What one line says happened: an iteration (and its paused requests), a limit stated."""
    return _step(line) + _config(line)


def _read_stamp(line: str, year: int) -> str | None:
    if found := _GLOG.match(line):
        month, day, clock = found.groups()
        return local_stamp_of_utc(year, int(month), int(day), clock)
    if found := _TRITON_ISO.match(line):
        y, month, day, clock = found.groups()
        return local_stamp_of_utc(int(y), int(month), int(day), clock)
    if found := _PY_LOGGER.match(line):
        month, day, y, clock = found.groups()
        return f"{y}-{month}-{day} {clock}"
    if "imestamp" in line and (found := _ITER_STAMP.search(line)):
        month, day, y, clock = found.groups()
        return f"{y}-{month}-{day} {clock}"
    return None


def _labelled(scrape: MetricLookup, family: str, key: str, kind: str) -> int | None:
    """The value of the sample of `family` whose `key` label is `kind`."""
    for sample in scrape.get(family):
        if sample.label(key) == kind:
            return int(sample.value)
    return None


def config_in_metrics(scrape: MetricLookup) -> dict[str, object]:
    """The KV blocks (`max`, `tokens_per`) and request slots (`max`) the backend publishes."""
    found: dict[str, object] = {}
    kv, kind = KV_BLOCK_METRICS
    if scrape.has(kv):
        found["num_gpu_blocks"] = _labelled(scrape, kv, kind, "max")
        found["block_size"] = _labelled(scrape, kv, kind, "tokens_per")
    found["max_num_seqs"] = _labelled(scrape, *REQUEST_METRICS, "max")
    return found


TRTLLM = EngineAdapter(
    name="trtllm_triton",
    title="TensorRT-LLM",
    option="trtllm",
    metrics=(TRTLLM_TRITON_METRICS, TRITON_METRICS),
    log=LogFormat(
        read_stats=_read_stats,
        read_stamp=_read_stamp,
        read_spec=_read_spec,
        record_start=_RECORD,
        expected=(
            'TensorRT-LLM iteration stats (`{"iter":…,"numActiveRequests":…,'
            '"kvCacheStats":{…}}` from trtllm-serve /metrics or getLatestIterationStats, '
            'or Triton --log-verbose `{"Active Request Count":…}`), print_iter_log lines '
            "and its [TensorRT-LLM] startup lines"
        ),
        read_events=_read_events,
        recognises=_RECOGNISES,
    ),
    knobs={
        Knob.MAX_SEATS: "--max_batch_size",  # trtllm-serve's spelling; the engine's build setting
        Knob.TOKEN_BUDGET: "--max_num_tokens",
        Knob.MEMORY_FRACTION: "--kv_cache_free_gpu_memory_fraction",
        Knob.MAX_CONTEXT: "--max_seq_len",
        Knob.TENSOR_PARALLEL: "--tp_size",
    },
    config_in_metrics=config_in_metrics,
)
