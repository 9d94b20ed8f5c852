"""engines, level 0½: what an engine adapter is — every engine-specific fact, as data.

An `EngineAdapter` holds what one inference engine does its own way: its
`/metrics` names (`MetricTable`s), the endpoints that say its configuration
and how to read them (`Endpoint`), where it says its context length (a
`/v1/models` card, an endpoint), the lines of its log (`LogFormat`) and the
names of its settings (`Knob` → flag) that advice quotes. Pure: readers
take parsed JSON or one log line and give plain values; the HTTP stays in
`collect` and `loadgen`, which ask the adapter what to fetch and how to read it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import IntEnum, StrEnum
from typing import Any, Protocol

from infertriage.engines.metrics import MetricTable

__all__ = [
    "AttentionFallback",
    "ConfigInMetrics",
    "ConfigReader",
    "Endpoint",
    "EngineAdapter",
    "EventKind",
    "HostRoles",
    "Knob",
    "LimitReader",
    "LogEvent",
    "LogFormat",
    "MetricLookup",
    "SaidLimit",
    "SpecLine",
    "StatedValues",
    "StatsLine",
    "TokenizeForm",
    "as_int",
    "config_fields",
    "local_stamp_of_utc",
    "positive",
    "stated_values",
    "typed_label",
]


class Knob(StrEnum):
    """A setting advice may tell the user to change; each engine spells it its own way."""

    MAX_SEATS = "max_seats"  # how many requests run in one batch
    TOKEN_BUDGET = "token_budget"  # tokens one step may schedule
    MEMORY_FRACTION = "memory_fraction"  # the share of GPU memory the engine takes
    MAX_CONTEXT = "max_context"  # the longest request (prompt + output)
    KV_CACHE_DTYPE = "kv_cache_dtype"
    PREFIX_CACHING = "prefix_caching"  # the flag that turns it on
    TENSOR_PARALLEL = "tensor_parallel"
    EAGER = "eager"  # the flag that turns CUDA graphs off
    CUDA_GRAPH_MAX_BATCH = "cuda_graph_max_batch"  # the largest batch captured in a CUDA graph
    ATTENTION_BACKEND = "attention_backend"  # the setting that picks the attention kernel
    API_SERVERS = "api_servers"  # how many API-server (HTTP, tokenizer) processes run
    STREAM_INTERVAL = "stream_interval"  # tokens the server gathers into one streamed chunk
    SKIP_TOKENIZER = "skip_tokenizer"  # token ids in and out: the client (de)tokenises
    KV_TRANSFER = "kv_transfer"  # P/D: the connector that moves the KV cache between instances
    OFFLOAD_SIZE = "offload_size"  # the host-memory KV offload tier's size (issue 33)
    # expert and pipeline parallelism
    EXPERT_BALANCER = "expert_balancer"  # the flag that turns the expert load balancer on
    PIPELINE_PARALLEL = "pipeline_parallel"  # pipeline stages


@dataclass(frozen=True, slots=True)
class SaidLimit:
    """A context length a server said, where it said it, and its prompt limit if it has one."""

    length: int
    source: str  # "/v1/models max_model_len", "/props n_ctx", …
    prompt_length: int | None = None


@dataclass(frozen=True, slots=True)
class StatsLine:
    """One periodic stats line of an engine's log."""

    engine: str  # "vllm", "vllm-v0", "sglang"
    kv_usage: float | None  # fraction
    running: float | None
    waiting: float | None
    prompt_tok_s: float | None = None  # the line's average over its interval
    gen_tok_s: float | None = None
    prefix_hit_rate: float | None = None  # fraction
    cuda_graph: bool | None = None  # SGLang says whether the decode ran from CUDA graphs
    engine_index: int | None = None  # vLLM V1 data parallel: `Engine 001:`


@dataclass(frozen=True, slots=True)
class SpecLine:
    """One speculative-decoding stats line: what the drafts gave over the line's interval."""

    mean_acceptance_length: float | None  # tokens per step, the bonus token included
    accepted_tokens: int | None
    drafted_tokens: int | None
    per_position: tuple[float, ...] = ()  # acceptance rate of draft position 1, 2, …
    acceptance_rate: float | None = None  # as the engine states it, when it does


class EventKind(StrEnum):
    """What one log line says happened, beyond a periodic stats line.

    Each kind documents the `LogEvent.values` keys its readers may give (all optional,
    plain floats; seconds in `_s`, fractions as 0–1). A reader gives only what its line says.
    """

    # one request finished, with the engine's own timings: queue_s, ttft_s, prefill_s,
    # decode_s, e2e_s, tpot_s (per output token), prompt_tokens, output_tokens,
    # cached_tokens, prefill_tok_s, decode_tok_s
    REQUEST = "request"
    SEAT_TAKEN = "seat_taken"  # a slot / batch seat begins a request; seat: its index
    SEAT_FREED = "seat_freed"  # seat: its index
    DEFERRED = "deferred"  # a request waits: no seat free (llama.cpp `defer task`)
    # the prompt is processed again from scratch although its prefix was cached (SWA or
    # hybrid memory, a cache reuse refused): prompt_tokens
    CACHE_MISS = "cache_miss"
    CONTEXT_SHIFT = "context_shift"  # the context was full: tokens dropped (discarded)
    PREEMPTED = "preempted"  # a running request was preempted / retracted: count
    # a collective (NCCL, Gloo) timed out or a rank's watchdog fired: timeout_s
    COLLECTIVE_TIMEOUT = "collective_timeout"
    ENGINE_DEAD = "engine_dead"  # the engine process died / EngineDeadError
    # startup configuration: max_num_seqs, max_model_len, max_num_batched_tokens,
    # num_gpu_blocks, block_size, gpu_memory_utilization, tensor_parallel,
    # data_parallel, pipeline_parallel, kv_cache_tokens, cuda_graphs (1/0); kv_cache_short (1):
    # the engine said its KV cache cannot hold one request of max_model_len
    CONFIG = "config"
    # a prefill/decode KV transfer (disaggregation): transfer_s, bytes, tokens, failed (1)
    KV_TRANSFER = "kv_transfer"
    # one engine step / iteration (TensorRT-LLM iteration stats): step_s, running,
    # waiting, kv_usage, tokens
    STEP = "step"
    # a request refused (too long, queue full, 429/503); prompt_tokens, and limit when the
    # prompt was over the scheduler's own limit (a token budget, a context length)
    REJECTED = "rejected"
    # the client went away before its request finished (vLLM "Aborted request …"): a client
    # time-out or a user who gave up
    ABORTED = "aborted"
    # the server's own metrics code complaining of a value no state can have: prometheus_client's
    # "Counters can only be incremented by non-negative amounts" (negative_counter: 1), a
    # "negative values for kv blocks" warning (negative_gauge: the value)
    METRIC_ARTEFACT = "metric_artefact"
    # expert parallelism's load balance over one step (vLLM EPLB's log): balancedness (the
    # mean EP rank's routed tokens over the busiest's), avg_tokens, max_tokens
    EXPERT_BALANCE = "expert_balance"
    # at start-up the engine left its flash-attention kernel for a slower path: reason (an
    # `AttentionFallback`), capability (the GPU's compute capability when the line says it:
    # 7.5 for "7 5"), kept_fused (1: another fused kernel runs, vLLM's XFormers or TGI's
    # Flash Attention V1; 0: no flash kernel at all, TGI's non-flash padded models), head_size
    ATTENTION_FALLBACK = "attention_fallback"


class AttentionFallback(IntEnum):
    """Why an engine's start-up left its flash-attention kernel (an ATTENTION_FALLBACK
    event's `reason`), most specific first."""

    GPU = 1  # the GPU's compute capability has no such kernel (Volta, Turing)
    DTYPE = 2  # the model's dtype is neither float16 nor bfloat16
    KV_CACHE_DTYPE = 3  # an FP8 KV cache
    BLOCK_SIZE = 4  # a KV block size the kernel does not take
    SLIDING_WINDOW = 5  # the model's sliding window
    HEAD_SIZE = 6  # a head size the kernel does not take
    NOT_AVAILABLE = 7  # the kernel's package is missing or failed to import


@dataclass(frozen=True, slots=True)
class LogEvent:
    """One thing a log line says happened: its kind and the figures the line gives."""

    kind: EventKind
    values: Mapping[str, float] = field(default_factory=dict)
    rank: int | None = None  # the data-parallel rank / engine / replica the line is from

    def get(self, key: str) -> float | None:
        return self.values.get(key)


ConfigReader = Callable[[Any, dict[str, Any]], None]  # (document, found so far) → fills found
LimitReader = Callable[[Mapping[str, Any]], SaidLimit | None]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A GET endpoint that says something of the server's configuration."""

    path: str
    read_config: ConfigReader | None = None  # for run.json's server_config
    read_limit: LimitReader | None = None  # the context length, before any load
    is_object: bool = True  # a JSON object (its scalar fields are kept); else read as is


@dataclass(frozen=True)
class LogFormat:
    """How an engine's log says its stats, its time and its preemptions."""

    read_stats: Callable[[str], StatsLine | None]
    read_stamp: Callable[[str, int], str | None]  # (line, year) → "YYYY-MM-DD HH:MM:SS"
    preempted: re.Pattern[str] | None = None  # one line per preemption
    cumulative_preemptions: re.Pattern[str] | None = None  # group 1: a running count
    read_spec: Callable[[str], SpecLine | None] | None = None  # speculative-decoding stats
    record_start: re.Pattern[str] | None = None  # where a record begins (to split glued ones)
    interval_s: float | None = None  # how often it logs its stats; None: not on a clock
    expected: str = ""  # the lines it recognises, for an error that names them
    stuck: re.Pattern[str] | None = None  # its watchdog gave up; group 1: seconds without progress
    # every event a line says (requests, seats, cache misses, config, collectives…); () if none
    read_events: Callable[[str], tuple[LogEvent, ...]] | None = None
    # whether a line is this engine's at all (recognised though it says nothing we count):
    # names the engine of a log without a stats line
    recognises: re.Pattern[str] | None = None
    # the title of each stats-line variant its readers name (`StatsLine.engine`) where it is
    # not the adapter's own: vLLM's V1 and V0 lines
    variant_titles: Mapping[str, str] = field(default_factory=dict)
    # plain words of the lines that begin a start of the server (its start-up settings):
    # what a log says at start-up holds from its last start on
    started: tuple[str, ...] = ()
    # plain words every line of an `ATTENTION_FALLBACK` event holds (a cheap prefilter)
    fallback_words: tuple[str, ...] = ()


TokenizeBody = Callable[[str, Mapping[str, object]], dict[str, object] | None]


@dataclass(frozen=True)
class TokenizeForm:
    """How an engine's `/tokenize` is asked and read; `loadgen.tokencheck` tries each
    engine's in the registry's order until one answers.

    `body` takes the model and the fields of a prompt — `{"prompt", "add_special_tokens"}`
    or a request's own (`prompt` or `messages`) — and gives the POST body, or None where
    this form cannot count them (llama.cpp's has no chat template). An engine whose
    `/tokenize` applies no chat template may name the endpoint that does
    (`template_path`, its answer read by `read_template`)."""

    name: str  # as `TokenCheck.form` says it: "vllm", "llama.cpp"
    path: str
    body: TokenizeBody
    count: Callable[[Any], int | None]  # the answer's token count; None: no answer
    template_path: str = ""
    read_template: Callable[[Any], str | None] | None = None
    # its count is what `usage.prompt_tokens` says for the same prompt (llama.cpp's may add
    # a BOS the completion does not count: it sizes prompts, it is never cross-checked)
    counts_like_usage: bool = True
    read_limit: Callable[[Any], SaidLimit | None] | None = None  # a context length it tells


class LabelledSample(Protocol):
    """One sample of a scrape, as `collect.parse` gives it."""

    @property
    def value(self) -> float: ...

    @property
    def labels(self) -> tuple[tuple[str, str], ...]: ...

    def label(self, key: str) -> str | None: ...


class MetricLookup(Protocol):
    """A parsed scrape, as `collect.parse.Exposition` is: samples by name."""

    def get(self, name: str) -> Sequence[LabelledSample]: ...

    def has(self, name: str) -> bool: ...


# a scrape → the server settings its metrics carry (num_gpu_blocks, block_size, max_num_seqs…)
ConfigInMetrics = Callable[[MetricLookup], Mapping[str, object]]


@dataclass(frozen=True, slots=True)
class HostRoles:
    """How an engine names its processes and threads on the host, by role: words (lower
    case) that a thread's name contains. The API server (HTTP, tokenisation,
    detokenisation, serialisation) is matched first, then the engine core (the
    scheduler's loop), then model execution; a thread of the server's own process that
    none names is the API server's, a child process's is model execution's."""

    api_server: tuple[str, ...] = ()
    engine_core: tuple[str, ...] = ()
    worker: tuple[str, ...] = ()


@dataclass(frozen=True)
class EngineAdapter:
    """Everything engine-specific about one engine (see the module docstring)."""

    name: str  # the engine as `collect.detect` names it: vllm, sglang, tgi, …
    title: str
    metrics: tuple[MetricTable, ...]  # the first is the engine's own; others are variants
    endpoints: tuple[Endpoint, ...] = ()  # probed after /v1/models, in this order
    read_card: LimitReader | None = None  # the context length in a /v1/models card
    log: LogFormat | None = None
    knobs: Mapping[Knob, str] = field(default_factory=dict)  # → the flag, e.g. --max-num-seqs
    tokenize: TokenizeForm | None = None  # its `/tokenize`, where it has one
    config_in_metrics: ConfigInMetrics | None = None  # settings its `/metrics` carries
    option: str = ""  # what `monitor-config --engine` takes for it; "": its name
    host_roles: HostRoles = HostRoles()  # its processes and threads by role (host sampling)

    @property
    def choice(self) -> str:
        """The engine as `monitor-config --engine` names it (`option`, else `name`)."""
        return self.option or self.name

    @property
    def names(self) -> tuple[str, ...]:
        """Every name detection may give this engine (TensorRT-LLM's plain-Triton variant)."""
        return tuple(table.engine for table in self.metrics)

    def endpoint(self, path: str) -> Endpoint | None:
        return next((e for e in self.endpoints if e.path == path), None)


def positive(value: object) -> int | None:
    """`value` when it is a positive int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def typed_label(text: str) -> object:
    """A Prometheus label value as the Python value it spells: 'True' → True, '16' → 16."""
    lowered = text.strip().lower()
    if lowered in {"true", "false"}:
        return lowered == "true"
    if lowered in {"none", "null", ""}:
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def as_int(value: object) -> int | None:
    """A number (or a label spelling one) as an int; None for anything else."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str):
        typed = typed_label(value)
        return (
            int(typed) if isinstance(typed, int | float) and not isinstance(typed, bool) else None
        )
    return None


# a log reader's table: a pattern and the keys its groups give, in order
StatedValues = tuple[tuple[re.Pattern[str], tuple[str, ...]], ...]


def local_stamp_of_utc(
    year: int, month: int, day: int, clock: str, offset_s: float = 0.0
) -> str | None:
    """A UTC date and `HH:MM:SS` (or one `offset_s` ahead of UTC) as local time,
    "YYYY-MM-DD HH:MM:SS": the rest of the tool reads stamps as local time."""
    try:
        hour, minute, second = (int(part) for part in clock.split(":"))
        moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:
        return None
    utc_s = (moment - timedelta(seconds=offset_s)).timestamp()
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(utc_s))


def stated_values(line: str, table: StatedValues) -> dict[str, float]:
    """Every key of `table` whose pattern the line has: its groups' numbers, or 1 for a
    pattern without a group (a line that says a setting is on)."""
    values: dict[str, float] = {}
    for pattern, keys in table:
        found = pattern.search(line)
        if found is None:
            continue
        groups = found.groups() or ("1",)
        values.update(zip(keys, (float(g) for g in groups), strict=True))
    return values


def config_fields(
    line: str, pattern: re.Pattern[str], keys: Mapping[str, str], graphs_off: str
) -> dict[str, float]:
    """A start-up line's `name=value` settings under the `CONFIG` event's keys.

    `pattern` finds each setting (groups `k` and `v`); `keys` maps an engine's name to the
    event's key; `graphs_off` is the engine's flag that turns CUDA graphs off (vLLM
    `enforce_eager`, SGLang `disable_cuda_graph`), read as `cuda_graphs` 0 or 1. Values that
    are not numbers (`None`, `auto`) are left out."""
    values: dict[str, float] = {}
    for found in pattern.finditer(line):
        key, text = found.group("k"), found.group("v")
        if key == graphs_off and text in ("True", "False"):
            values["cuda_graphs"] = 0.0 if text == "True" else 1.0
        elif key in keys and re.fullmatch(r"\d+(?:\.\d+)?", text):
            values[keys[key]] = float(text)
    return values
