"""engines, level 0½: the Text Generation Inference adapter — every TGI-specific fact.

Its `/metrics` names (`tgi_`; no time-to-first-token metric and no KV-cache
metrics; its token totals come from the `_sum` of its per-request length
histograms, so they move only when a request finishes); `/info` (version,
`model_id`, `max_total_tokens`, `max_input_tokens` or the older
`max_input_length`, `max_concurrent_requests`, `max_batch_total_tokens`);
its log (the router's and launcher's `tracing` lines, as text or as `--json-output`
JSON, stamped in UTC: one line per finished request with its timings, the
startup lines that state its limits, the requests it refused); and its
launcher's flags.
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
    Knob,
    LogEvent,
    LogFormat,
    SaidLimit,
    StatedValues,
    StatsLine,
    as_int,
    local_stamp_of_utc,
    positive,
    stated_values,
)
from infertriage.engines.metrics import ENGINE_DOMAIN, MetricTable, metric

__all__ = ["TGI", "TGI_METRICS"]

_ON_FINISH = "the histogram's _sum: moves only when a request finishes"

TGI_METRICS = MetricTable(
    engine="tgi",
    title="TGI",
    prefixes=("tgi_",),
    domain=ENGINE_DOMAIN,
    mappings=(
        metric("queue.waiting", "tgi_queue_size"),
        metric("queue.running", "tgi_batch_current_size", note="requests in the current batch"),
        metric("requests.finished", "tgi_request_success"),
        metric("requests.failed", "tgi_request_failure"),
        metric("server.queue_time", "tgi_request_queue_duration"),
        metric("server.inference_time", "tgi_request_inference_duration"),
        metric("server.e2e", "tgi_request_duration"),
        metric(
            "server.tpot",
            "tgi_request_mean_time_per_token_duration",
            note="per-request mean; TGI has no per-token histogram",
        ),
        metric("server.prompt_len", "tgi_request_input_length"),
        metric("server.output_len", "tgi_request_generated_tokens"),
        metric("tokens.prompt", "tgi_request_input_length_sum", note=_ON_FINISH),
        metric("tokens.generation", "tgi_request_generated_tokens_sum", note=_ON_FINISH),
        metric(
            "spec.accepted_tokens",
            "tgi_request_skipped_tokens_sum",
            note="tokens speculation let TGI skip",
        ),
    ),
    unsupported={
        "server.ttft": "TGI exports no time-to-first-token metric: measure TTFT on the client",
        "server.itl": "TGI exports only the per-request mean (server.tpot)",
        "kv.usage": "TGI exports no KV-cache metrics",
        "kv.blocks_total": "TGI exports no KV-cache metrics",
        "preemptions": "TGI exports no preemption counter",
    },
)


def _read_info(document: Mapping[str, Any], found: dict[str, Any]) -> None:
    found["version"] = document.get("version")
    found["model"] = found.get("model") or document.get("model_id")
    found["max_model_len"] = found.get("max_model_len") or as_int(document.get("max_total_tokens"))
    found["max_num_seqs"] = as_int(document.get("max_concurrent_requests"))
    found["kv_tokens_total"] = as_int(document.get("max_batch_total_tokens"))
    found["max_num_batched_tokens"] = positive(document.get("max_batch_prefill_tokens"))


def _read_limit(document: Mapping[str, Any]) -> SaidLimit | None:
    total = positive(document.get("max_total_tokens"))
    prompt = positive(document.get("max_input_tokens")) or positive(
        document.get("max_input_length")
    )
    return SaidLimit(total, "/info max_total_tokens", prompt) if total is not None else None


# tracing-subscriber's stamp, the router's and the launcher's alike (TGI 0.9–3.x): RFC 3339 in
# UTC, "2024-02-14T06:49:51.437631Z  INFO …"; with --json-output the line is a JSON object that
# begins {"timestamp":"2024-03-09T05:08:14.751646Z","level":"INFO",… (router/src/logging.rs:
# `fmt::layer().json().flatten_event(true)`, launcher/src/main.rs likewise)
_STAMP = re.compile(
    r'^(?:\{"timestamp":")?(\d{4})-(\d\d)-(\d\d)T(\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:?\d\d)'
)
# the same, anywhere: a record glued to the one before it (or behind a container's `tgi-1  | `)
_RECORD = re.compile(
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z\s+(?:TRACE|DEBUG|INFO|WARN|ERROR)\b"
    r'|\{"timestamp":"\d{4}-\d\d-\d\dT'
)

# router/src/server.rs: `generate`, `generate_stream`, `completions` and `chat_completions` are
# spans whose fields the handler records when the request ends (`span.record("total_time",
# format!("{total_time:?}"))`), then logs "Success" inside the span: "2024-02-14T06:49:51.437631Z
#  INFO generate{parameters=GenerateParameters { … } total_time="611.286748ms"
# validation_time="754.5µs" queue_time="127.337µs" inference_time="610.405028ms"
# time_per_token="43.600359ms" seed="None"}: text_generation_router::server:
# router/src/server.rs:299: Success"; as JSON the span's fields are `"span":{…,"total_time":
# "611.286748ms",…}` and the message `"message":"Success"`. The values are Rust's `Duration`
# Debug form: "4.065504959s", "611.28ms", "49.382µs", "70ns". time_per_token is inference_time
# over the generated tokens (prefill included); validation_time and inference_time (prefill +
# decode) have no `EventKind.REQUEST` key, so they are not given.
_TIMING = re.compile(
    r'\b(total_time|queue_time|time_per_token)(?:=|":)"(\d+(?:\.\d+)?)(ns|µs|μs|us|ms|s)"'
)
_TIMING_KEYS = {"total_time": "e2e_s", "queue_time": "queue_s", "time_per_token": "tpot_s"}
_UNIT_S = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "μs": 1e-6, "us": 1e-6, "ns": 1e-9}

# lines that state values: `(pattern, the keys of its groups in order)`

# Startup lines that state a limit, each `(pattern, keys of its groups)` (a pattern without a
# group says its key is on: 1). Router: "Setting max batch total tokens to 801568" (1.x–2.x
# router/src/main.rs and server.rs, 3.x backends/v3/src/lib.rs), "Maximum total tokens
# defaulted to 8000" (3.x backends/v3/src/main.rs). Launcher (launcher/src/main.rs): "Default
# `max_total_tokens` to 4096", "Default `max_batch_prefill_tokens` to 4145", "Sharding model on
# 2 processes", "Using default cuda graphs [1, 2, 4, 8, 16, 32]"; and from the shards it relays
# (server/text_generation_server/models/flash_causal_lm.py) "KV-cache blocks: 52719, size: 1"
# and "Cuda Graphs are enabled for sizes [32, 16, 8, 4, 2, 1]".
_CONFIG_LINES: StatedValues = (
    (re.compile(r"Setting max batch total tokens to (\d+)"), ("kv_cache_tokens",)),
    (re.compile(r"Maximum total tokens defaulted to (\d+)"), ("max_model_len",)),
    (re.compile(r"Default `max_total_tokens` to (\d+)"), ("max_model_len",)),
    (re.compile(r"Default `max_batch_prefill_tokens` to (\d+)"), ("max_num_batched_tokens",)),
    (re.compile(r"Sharding model on (\d+) processes"), ("tensor_parallel",)),
    (re.compile(r"KV-cache blocks: (\d+), size: (\d+)"), ("num_gpu_blocks", "block_size")),
    (
        re.compile(r"Using default cuda graphs \[\d|Cuda Graphs are enabled for sizes"),
        ("cuda_graphs",),
    ),
)
# The launcher's `Args { … }`: one line up to 1.x (`{:?}`: "max_concurrent_requests: 128, …
# max_total_tokens: 8192, … max_batch_prefill_tokens: 4096, max_batch_total_tokens: 16000,
# num_shard: Some(4)"; 2.x+ spells the token limits `Some(4096)`); from 2.x it is pretty-printed
# (`{:#?}`), one field a line, and an `Option`'s value sits alone on the next line, so only
# "max_concurrent_requests: 128," (a plain number) can be read there.
_ARGS: StatedValues = (
    (re.compile(r"\bmax_concurrent_requests: (\d+)"), ("max_num_seqs",)),
    (re.compile(r"\bmax_total_tokens: (?:Some\()?(\d+)"), ("max_model_len",)),
    (re.compile(r"\bmax_batch_prefill_tokens: (?:Some\()?(\d+)"), ("max_num_batched_tokens",)),
    (re.compile(r"\bmax_batch_total_tokens: (?:Some\()?(\d+)"), ("kv_cache_tokens",)),
    (re.compile(r"\bnum_shard: Some\((\d+)\)"), ("tensor_parallel",)),
)
_PRETTY_ARG = re.compile(r"max_concurrent_requests: \d+,")
_CONFIG_HINTS = (
    "max batch total",
    "efault",
    "Sharding model",
    "KV-cache blocks",
    "uda ",
    "Args {",
    "max_concurrent_requests",
)

# router/src/infer/mod.rs (infer.rs before 2.0): a request refused before it is queued is logged
# at ERROR under the `text_generation_router::infer` target: "no permits available" (more than
# --max-concurrent-requests; the client gets 429 "Model is overloaded") or its validation error
# ("`inputs` tokens + `max_new_tokens` must be <= 2048. Given: …"; 422). The same target logs
# the failures of requests already admitted, which are not refusals.
_REFUSED = re.compile(
    r'Z\s+ERROR\s.*?\btext_generation_router::infer: |"level":"ERROR".*"target":'
    r'"text_generation_router::infer"'
)
_ADMITTED_FAILURES = ("Request failed during generation", "Incomplete generation")

# a TGI line at all: its targets (router, launcher, gRPC client, the shards' Python package),
# its warmup's own out-of-memory words, and a field of the launcher's pretty-printed Args
_RECOGNISES = re.compile(
    r"text_generation_(?:router|launcher|client|server)"
    r"|Not enough memory to handle \d+ prefill tokens|^max_concurrent_requests: \d+,$"
)


def _offset_s(zone: str) -> float:
    """`Z`, `+05:30` or `-0800` as seconds ahead of UTC."""
    if zone == "Z":
        return 0.0
    digits = zone[1:].replace(":", "")
    size = int(digits[:2]) * 3600 + int(digits[2:]) * 60
    return float(size if zone[0] == "+" else -size)


def _read_stamp(line: str, year: int) -> str | None:
    del year  # the stamp carries its own
    found = _STAMP.match(line)
    if found is None:
        return None
    y, mo, d, clock, zone = found.groups()
    return local_stamp_of_utc(int(y), int(mo), int(d), clock, _offset_s(zone))


def _no_stats(line: str) -> StatsLine | None:
    """TGI logs no periodic stats line (its batch sizes are in /metrics only)."""
    del line
    return None


def _request(line: str) -> LogEvent | None:
    """A finished request's "Success" line, with the timings its span recorded."""
    if "Success" not in line or "total_time" not in line:
        return None
    if not (line.endswith(": Success") or '"message":"Success"' in line):
        return None  # at DEBUG the span's other lines (its output) carry the same fields
    values: dict[str, float] = {}
    for found in _TIMING.finditer(line):  # the JSON form lists the span twice: first wins
        key = _TIMING_KEYS[found.group(1)]
        values.setdefault(key, float(found.group(2)) * _UNIT_S[found.group(3)])
    return LogEvent(EventKind.REQUEST, values) if values else None


def _config(line: str) -> LogEvent | None:
    """A startup line stating a limit, or the launcher's Args."""
    if not any(hint in line for hint in _CONFIG_HINTS):
        return None
    values = stated_values(line, _CONFIG_LINES)
    if "Args {" in line or _PRETTY_ARG.fullmatch(line):
        values.update(stated_values(line, _ARGS))
    return LogEvent(EventKind.CONFIG, values) if values else None


def _rejected(line: str) -> LogEvent | None:
    """A request the router refused: too many in flight, or invalid."""
    if "ERROR" not in line or "text_generation_router::infer" not in line:
        return None
    if not _REFUSED.search(line) or any(words in line for words in _ADMITTED_FAILURES):
        return None
    return LogEvent(EventKind.REJECTED)


# server/text_generation_server/utils/flash_attn.py (commit 00e0d2d7): "GPU with CUDA capability
# {major} {minor} is not supported for Flash Attention V2" (it then tries V1 and warns "Unable
# to use Flash Attention V2: …"), "GPU with CUDA capability {major} {minor} is not supported"
# (no flash kernel at all); models/__init__.py catches that ImportError as "Could not import
# Flash Attention enabled models: {e}" and serves the non-flash (padded) model classes.
_NO_FLASH_MODELS = "Could not import Flash Attention enabled models"
_CAPABILITY_WORDS = "GPU with CUDA capability"
_CAPABILITY = re.compile(
    r"GPU with CUDA capability (\d+) (\d+) is not supported(?P<v2> for Flash Attention V2)?"
)
# reasons of that ImportError that are no fallback on a GPU: the user's own setting and a
# build with no GPU (flash_attn.py: "`USE_FLASH_ATTENTION` is false.", "CUDA is not
# available"; layers/attention/__init__.py, commit 07128cc1: "System {SYSTEM} doesn't support
# flash/paged attention", a CPU build)
_NO_FALLBACK = (
    "`USE_FLASH_ATTENTION` is false",
    "CUDA is not available",
    "doesn't support flash/paged attention",
)


def _attention_fallback(line: str) -> LogEvent | None:
    """The flash kernels refused at start-up: the GPU's capability, or their import failed
    (a missing or broken package: "Flash Attention V2 is not installed.", another error).
    None where the reason is no fallback (`_NO_FALLBACK`)."""
    found = _CAPABILITY.search(line) if _CAPABILITY_WORDS in line else None
    no_models = _NO_FLASH_MODELS in line
    if found is None and (not no_models or any(words in line for words in _NO_FALLBACK)):
        return None
    if found is None:
        values = {"reason": float(AttentionFallback.NOT_AVAILABLE), "kept_fused": 0.0}
        return LogEvent(EventKind.ATTENTION_FALLBACK, values)
    kept = found.group("v2") is not None and not no_models  # V2 refused, V1 serves
    values = {
        "reason": float(AttentionFallback.GPU),
        "capability": int(found.group(1)) + int(found.group(2)) / 10,
        "kept_fused": 1.0 if kept else 0.0,
    }
    return LogEvent(EventKind.ATTENTION_FALLBACK, values)


def _read_events(line: str) -> tuple[LogEvent, ...]:
    """What one TGI line says happened: a request finished or refused, a limit stated, the
    flash-attention kernels refused."""
    found = (_request(line), _rejected(line), _config(line), _attention_fallback(line))
    return tuple(event for event in found if event is not None)


TGI = EngineAdapter(
    name="tgi",
    title="TGI",
    metrics=(TGI_METRICS,),
    endpoints=(Endpoint("/info", read_config=_read_info, read_limit=_read_limit),),
    log=LogFormat(
        read_stats=_no_stats,
        read_stamp=_read_stamp,
        record_start=_RECORD,
        expected=(
            'TGI router lines (`generate{… total_time="…" queue_time="…" …}: … Success`, '
            "as text or --json-output JSON) and its launcher's startup lines"
        ),
        read_events=_read_events,
        recognises=_RECOGNISES,
        started=("Args {",),  # the launcher's first line: `tracing::info!("{:?}", args)`
        fallback_words=(_CAPABILITY_WORDS, _NO_FLASH_MODELS),
    ),
    knobs={
        Knob.MAX_SEATS: "--max-concurrent-requests",
        Knob.TOKEN_BUDGET: "--max-batch-prefill-tokens",
        Knob.MEMORY_FRACTION: "--cuda-memory-fraction",
        Knob.MAX_CONTEXT: "--max-total-tokens",
        Knob.TENSOR_PARALLEL: "--num-shard",
    },
)
