"""engines, level 0½: the llama.cpp server adapter — every llama-server-specific fact.

Its `/metrics` names (`llamacpp:`, only with `--metrics`; its token counters
move only when a request finishes, and its `*_tokens_seconds` throughput
gauges are reset on every read of `/metrics`, so each scrape sees only what
finished since the previous read, by anyone; no latency histograms;
`kv_cache_usage_ratio` was dropped by newer upstream builds); `/props`
(`build_info`, `n_ctx` or `default_generation_settings.n_ctx`,
`total_slots`), `/slots`, `meta.n_ctx` in its `/v1/models` cards (never
`n_ctx_train`, the model's trained length); the lines its log prints (a slot
taking and freeing a request, a task deferred, a prompt processed again from
scratch, a context shift, each request's own timings, speculative-decoding
acceptance, the slots and context it started with — see "its log" below); and
its flags.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from infertriage.engines.base import (
    Endpoint,
    EngineAdapter,
    EventKind,
    Knob,
    LogEvent,
    LogFormat,
    SaidLimit,
    SpecLine,
    StatsLine,
    TokenizeForm,
    as_int,
    positive,
)
from infertriage.engines.metrics import ENGINE_DOMAIN, MetricTable, metric

__all__ = [
    "APPLY_TEMPLATE_PATH",
    "LLAMACPP",
    "LLAMACPP_METRICS",
    "TOKENIZE_PATH",
    "templated_prompt",
    "token_count",
    "tokenize_body",
]

TOKENIZE_PATH = "/tokenize"  # POST {"content"}: lists `tokens` (no chat template applied)
APPLY_TEMPLATE_PATH = "/apply-template"  # POST {"messages"}: the templated `prompt`

_ON_FINISH = "moves only when a request finishes"
_RESETS = "reset on every read of /metrics: covers only what finished since the last read"
_NO_HISTOGRAMS = "llama.cpp exports no latency histograms: measure it on the client"

LLAMACPP_METRICS = MetricTable(
    engine="llamacpp",
    title="llama.cpp",
    prefixes=("llamacpp:",),
    domain=ENGINE_DOMAIN,
    mappings=(
        metric("queue.running", "llamacpp:requests_processing"),
        metric("queue.waiting", "llamacpp:requests_deferred"),
        metric(
            "kv.usage",
            "llamacpp:kv_cache_usage_ratio",
            note="dropped by newer upstream builds",
        ),
        metric("kv.tokens_used", "llamacpp:kv_cache_tokens"),
        metric("tokens.prompt", "llamacpp:prompt_tokens_total", note=_ON_FINISH),
        metric("tokens.generation", "llamacpp:tokens_predicted_total", note=_ON_FINISH),
        metric("server.prefill_seconds", "llamacpp:prompt_seconds_total", note=_ON_FINISH),
        metric("server.decode_seconds", "llamacpp:tokens_predicted_seconds_total", note=_ON_FINISH),
        metric("tokens.prompt_rate", "llamacpp:prompt_tokens_seconds", note=_RESETS),
        metric("tokens.generation_rate", "llamacpp:predicted_tokens_seconds", note=_RESETS),
        metric("server.steps", "llamacpp:n_decode_total", note="llama_decode() calls"),
        metric(
            "prefix_cache.hits",
            "llamacpp:prompt_tokens_cached_total",
            note="prompt tokens a slot reused from its cache; " + _ON_FINISH,
        ),
        metric("spec.drafts", "llamacpp:spec_decode_num_drafts_total"),
        metric("spec.draft_tokens", "llamacpp:spec_decode_num_draft_tokens_total"),
        metric("spec.accepted_tokens", "llamacpp:spec_decode_num_accepted_tokens_total"),
    ),
    unsupported={
        "server.ttft": _NO_HISTOGRAMS,
        "server.itl": _NO_HISTOGRAMS,
        "server.e2e": _NO_HISTOGRAMS,
        "server.queue_time": _NO_HISTOGRAMS,
        "kv.blocks_total": "llama.cpp has no paged KV blocks; see /props n_ctx for its capacity",
    },
    notes=(
        "llama.cpp's token counters move only when a request finishes.",
        "llama.cpp resets its *_tokens_seconds gauges on every read of /metrics.",
    ),
)


def _n_ctx(document: Mapping[str, Any]) -> object:
    settings = document.get("default_generation_settings")
    n_ctx = document.get("n_ctx")
    if n_ctx is None and isinstance(settings, Mapping):
        n_ctx = settings.get("n_ctx")
    return n_ctx


def _read_props(document: Mapping[str, Any], found: dict[str, Any]) -> None:
    found["version"] = document.get("build_info")
    found["max_model_len"] = found.get("max_model_len") or as_int(_n_ctx(document))
    found["max_num_seqs"] = as_int(document.get("total_slots"))


def _props_limit(document: Mapping[str, Any]) -> SaidLimit | None:
    settings = document.get("default_generation_settings")
    n_ctx = positive(document.get("n_ctx"))
    if n_ctx is None and isinstance(settings, Mapping):
        n_ctx = positive(settings.get("n_ctx"))
    return SaidLimit(n_ctx, "/props n_ctx") if n_ctx is not None else None


def _read_slots(document: Any, found: dict[str, Any]) -> None:
    if not isinstance(document, list):
        return
    slots = [slot for slot in document if isinstance(slot, dict)]
    busy = sum(1 for slot in slots if slot.get("is_processing"))
    contexts = {as_int(slot.get("n_ctx")) for slot in slots} - {None}
    found["details"]["/slots"] = {
        "num_slots": len(slots),
        "num_busy": busy,
        "n_ctx_per_slot": sorted(c for c in contexts if c is not None),
    }


def tokenize_body(text: str, *, special: bool | None = None) -> dict[str, object]:
    """A `/tokenize` body; `special` adds `add_special` (a BOS) when given."""
    body: dict[str, object] = {"content": text}
    if special is not None:
        body["add_special"] = special
    return body


def _tokenize_fields(model: str, fields: Mapping[str, object]) -> dict[str, object] | None:
    """The `/tokenize` body of a prompt's fields (with a BOS unless `add_special_tokens` is
    false); None for `messages`: this `/tokenize` applies no chat template. No model."""
    del model
    prompt = fields.get("prompt")
    if not isinstance(prompt, str):
        return None
    return tokenize_body(prompt, special=bool(fields.get("add_special_tokens", True)))


def token_count(document: Any) -> int | None:
    """How many `tokens` a `/tokenize` answer lists."""
    tokens = document.get("tokens") if isinstance(document, dict) else None
    return len(tokens) if isinstance(tokens, list) else None


def templated_prompt(document: Any) -> str | None:
    """The `prompt` of an `/apply-template` answer."""
    prompt = document.get("prompt") if isinstance(document, dict) else None
    return prompt if isinstance(prompt, str) else None


def _read_card(card: Mapping[str, Any]) -> SaidLimit | None:
    meta = card.get("meta")
    n_ctx = positive(meta.get("n_ctx")) if isinstance(meta, Mapping) else None
    return SaidLimit(n_ctx, "/v1/models meta.n_ctx") if n_ctx is not None else None


# --- its log ------------------------------------------------------------------------------
#
# llama-server (ggml-org/llama.cpp tools/server/server.cpp and, once split out of it,
# server-context.cpp; examples/server/server.cpp before mid 2025) logs through the SLT_*/SRV_*
# macros of server-common.h (utils.hpp before): "slot %12.*s: id %2d | task %d | " and
# "srv  %12.*s: ", the function's name cut to 12 characters ("slot launch_slot_: id  0 | task
# 12 | …"; a fork, llama-box, pads to 25). common/log.cpp puts "M.SS.mmm.uuu " (time since the
# start, not a clock) and a level letter before a record with --log-timestamps/--log-prefix,
# and router mode puts "[port] " before a model's lines. From early 2024 to September 2024
# (b3579 in ggml-org/llama.cpp#9016) it printed LOG_INFO records instead: `INFO [
# launch_slot_with_task] slot is processing task | tid="11744" timestamp=1723514873 id_slot=0
# id_task=0`, or the same as one JSON object (--log-format json); before that
# (ggml-org/llama.cpp#5195, January 2024) "slot 0 is processing [task id: 283]". Each reader
# below takes every one of these.

_ENGINE = "llamacpp"
_PREFIX = r"(?:\[\d+\] )?(?:\d+\.\d\d\.\d{3}\.\d{3} )?(?:[IWEDT] )?"
# any llama-server line, after a wrapper's own prefix when there is one (journald's
# "llama-server[24689]: ", docker compose's "llama-1  | "); a LOG_INFO JSON record names its
# function and line
_RECOGNISES = re.compile(
    r"^(?:.{0,80}?(?:\]: |\| ))?" + _PREFIX + r"(?:(?:slot|srv|que) +[\w()]+: |slot \d+[ :]|"
    r"(?:llama|llm_|load_|print_info|print_timings|common_|ggml_|system_info|build|sched_|"
    r"graph_|alloc_|clip_|mtmd_)\w*: |main: |request: [A-Z]+ |-> Slot \d+ |"
    r"(?:INFO|WARN|ERR|VERB) +\[ *\w+\] |"
    r"\{(?=.*\"function\": ?\"\w+\")(?=.*\"line\": ?\d)|"
    r" *(?:prompt eval|generation eval|eval|total) time +=|draft acceptance|statistics )"
)
# where a record glued to the one before it starts: its time-since-start stamp, whose minutes
# carry no leading zero. Not after a space, nor inside a number begun after one, so that a
# wrapper's prefix ("llama-1  | 12.05.318.181 I …") never cuts a record in two; "truncated =
# 0" glued to "0.06.896.140 I srv …" is cut between the two zeros.
_RECORD = re.compile(
    r"(?<![\s.])(?<!\s[1-9])(?<!\s[1-9]\d)(?<!\s[1-9]\d\d)"
    r"(?:\[\d+\] )?(?:0|[1-9]\d*)\.\d\d\.\d{3}\.\d{3} [IWEDT] "
)
# LOG_INFO records carry the Unix time they were written: text "| tid=\"11744\"
# timestamp=1723514873 …", JSON {"tid":"14964","timestamp":1717067386,…} (keys in any order)
_UNIX_TIME = re.compile(r'(?:\| tid="[^"]*" timestamp=|^\{.*?"timestamp": ?)(\d{9,10})\b')

# the slot a line is about: "id  0 |", LOG_INFO "id_slot=0" / "slot_id":0 (early 2024), "slot 0"
_SEAT = re.compile(r"\bid +(\d+) \||\b(?:id_slot|slot_id)\"?[=:] ?(\d+)|\bslot (\d+)\b")
# print_timings (SLT_INF; LOG_INFO "prompt eval time     = …" and "generation eval time = …
# runs"; LOG_TEE "print_timings: …" in 2023): one request's prefill and its decode, on lines
# of their own ("slot print_timing: id  0 | task 0 |" alone, then the figures, until 2026)
_TIMING = re.compile(
    r"(?P<phase>prompt eval|eval) time\s*=\s*(?P<ms>[\d.]+) ms\s*/\s*(?P<n>\d+) (?:tokens|runs)"
    r"\s*\(\s*(?P<per>[-\w.]+) ms per token,\s*(?P<rate>[-\w.]+) tokens per second\)"
)
# llama.cpp's totals over a whole context (llama_perf_context_print, common_perf_print and
# 2023's llama_print_timings): the same words, but no one request's
_TOTALS = re.compile(r"\w+_print_timings:|perf\w*_print:")
# SLT_WRN "slot context shift, n_keep = 1, n_left = 2046, n_discard = 1023"; LOG_INFO "slot
# context shift | … n_discard=1023"; 2023 "slot 0: context shift - n_keep = 0, … n_discard = 255"
_DISCARD = re.compile(r"\bn_discard\"?\s*[=:]\s*(\d+)")
# the configuration it started with, and the slot context each prompt line repeats
_CONFIG_FIELDS: tuple[tuple[re.Pattern[str], str], ...] = (
    # SRV_INF "initializing slots, n_slots = 4" (2024–2026), "initializing, n_slots = 1,
    # n_ctx_slot = 50176, kv_unified = 'false'" (2026); LOG_INFO "initializing slots | … n_slots=4"
    (re.compile(r"\bn_slots\"?\s*[=:]\s*(\d+)"), "max_num_seqs"),
    # "n_parallel is set to auto, using n_parallel = 4 and kv_unified = true" (2025–)
    (re.compile(r"using n_parallel = (\d+)"), "max_num_seqs"),
    # SLT_INF "new slot n_ctx_slot = 4096", "new prompt, n_ctx_slot = 4096, …"; LOG_INFO
    # "new slot | … n_ctx_slot=4096"
    (re.compile(r"\bn_ctx_slot\"?\s*[=:]\s*(\d+)"), "max_model_len"),
    (re.compile(r"new slot, n_ctx = (\d+)"), "max_model_len"),  # 2026
    (re.compile(r"-> Slot \d+ - max context: (\d+)"), "max_model_len"),  # 2023
    # llama_context "n_ctx_per_seq = 4096" (2025; "n_ctx_seq" from late 2025, "n_ctx_pre_seq"
    # in some builds) and its warning "n_ctx_seq (131072) < n_ctx_train (262144)"
    (re.compile(r"\bn_ctx_(?:per_|pre_)?seq\s*(?:=\s*|\()(\d+)"), "max_model_len"),
    # the whole KV cache and the batch: "llama_context: n_ctx         = 8192" (2025–),
    # "llama_new_context_with_model: n_ctx      = 2048" (to January 2025), llama_init_from_model
    (
        re.compile(
            r"(?:llama_context|llama_new_context_with_model|llama_init_from_model): +"
            r"n_ctx += +(\d+)"
        ),
        "kv_cache_tokens",
    ),
    (
        re.compile(
            r"(?:llama_context|llama_new_context_with_model|llama_init_from_model): +"
            r"n_batch += +(\d+)"
        ),
        "max_num_batched_tokens",
    ),
)
# SLT_CNT "draft acceptance rate = 0.57576 (  171 accepted /   297 generated)" (December 2024 to
# 2026); then SLT_INF "draft acceptance = 0.64479 (  167 accepted /   259 generated), mean
# acceptance length =  2.92, acceptance rate per position = (0.805, 0.632, 0.483)" and later
# "…, mean len =  4.38": one request's drafts
_SPEC = re.compile(
    r"draft acceptance(?: rate)? = (?P<rate>[\d.]+) \(\s*(?P<accepted>\d+) accepted /\s*"
    r"(?P<drafted>\d+) generated\)"
)
_SPEC_LENGTH = re.compile(r"mean (?:acceptance length|len) =\s*([\d.]+)")
_SPEC_POSITIONS = re.compile(r"acceptance rate per position = \(([\d., ]+)\)")
# send_error's "request (4390 tokens) exceeds the available context size (4096 tokens), try
# increasing it" and "input (… tokens) is larger than the max context size (… tokens). skipping"
_OVER_CONTEXT = re.compile(
    r"(?:request|input) \((?P<prompt>\d+) tokens\) (?:exceeds the available|is larger than the "
    r"max) context size \((?P<limit>\d+) tokens\)"
)


def _int_of(pattern: re.Pattern[str], line: str) -> int | None:
    """The first group of `pattern` that matched in `line`, as an int."""
    found = pattern.search(line)
    return None if found is None else int(next(g for g in found.groups() if g is not None))


def _finite(text: str) -> float | None:
    """A figure as llama.cpp printed it; None for its `inf` and `nan` (no token to divide by)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _seat_event(kind: EventKind) -> Callable[[str], LogEvent | None]:
    """A reader for a line about one slot: the event and the slot's index (every llama-server
    line about a slot names it; a line that names none is someone else's words)."""

    def read(line: str) -> LogEvent | None:
        seat = _int_of(_SEAT, line)
        return None if seat is None else LogEvent(kind, {"seat": float(seat)})

    return read


def _plain_event(kind: EventKind) -> Callable[[str], LogEvent | None]:
    """A reader for a line that says only that `kind` happened."""
    return lambda line: LogEvent(kind)


def _timing(line: str) -> LogEvent | None:
    """One request's prefill or decode, as a REQUEST event the analysis merges by order.

    llama.cpp counts only the prompt tokens it processed (not those its slot had cached);
    a phase of no token (or, for the decode, one) has no rate worth keeping."""
    found = _TIMING.search(line)
    if found is None or _TOTALS.search(line):
        return None
    seconds, tokens = float(found["ms"]) / 1e3, int(found["n"])
    per_token_ms, rate = _finite(found["per"]), _finite(found["rate"])
    if found["phase"] == "prompt eval":
        values = {"prefill_s": seconds, "prompt_tokens": float(tokens)}
        if tokens > 0 and rate is not None:
            values["prefill_tok_s"] = rate
    else:
        values = {"decode_s": seconds, "output_tokens": float(tokens)}
        if tokens > 1 and rate is not None:
            values["decode_tok_s"] = rate
        if tokens > 1 and per_token_ms is not None:
            values["tpot_s"] = per_token_ms / 1e3
    return LogEvent(EventKind.REQUEST, values)


def _context_shift(line: str) -> LogEvent | None:
    """A slot's context was full and it dropped `n_discard` tokens (not "… is disabled")."""
    discarded = _int_of(_DISCARD, line)
    return (
        None
        if discarded is None
        else LogEvent(EventKind.CONTEXT_SHIFT, {"discarded": float(discarded)})
    )


def _rejected(line: str) -> LogEvent:
    """A request longer than a slot's context, refused: its prompt and the limit, when said."""
    found = _OVER_CONTEXT.search(line)
    if found is None:
        return LogEvent(EventKind.REJECTED)
    values = {"prompt_tokens": float(found["prompt"]), "limit": float(found["limit"])}
    return LogEvent(EventKind.REJECTED, values)


def _config(line: str) -> LogEvent | None:
    """The slots, the per-slot context, the KV cache and the batch a startup line says."""
    values: dict[str, float] = {}
    for pattern, key in _CONFIG_FIELDS:
        number = _int_of(pattern, line)
        if number is not None and number > 0:
            values[key] = float(number)
    return LogEvent(EventKind.CONFIG, values) if values else None


# (words a line must hold, its reader): the first reader that reads the line gives its event.
# The words keep the cost of a line that says nothing to a few substring tests.
_READERS: tuple[tuple[str, Callable[[str], LogEvent | None]], ...] = (
    # SLT_INF "processing task" (", is_child = 0" from 2025); LOG_INFO "slot is processing task"
    ("processing task", _seat_event(EventKind.SEAT_TAKEN)),
    ("is processing [task", _seat_event(EventKind.SEAT_TAKEN)),  # 2023
    # SLT_INF "stop processing: n_past = 380, truncated = 0" ("n_tokens =" from late 2025);
    # LOG_INFO "slot released | …"; 2023 "slot 0 released (269 tokens in cache)"
    ("stop processing", _seat_event(EventKind.SEAT_FREED)),
    ("slot released", _seat_event(EventKind.SEAT_FREED)),
    ("tokens in cache)", _seat_event(EventKind.SEAT_FREED)),
    # SRV_DBG "no slot is available, defer task, id_task = 5" (and "requested slot is
    # unavailable, defer task" / "not enough free slots for child tasks, …"), printed with
    # --verbose only; LOG_VERBOSE "no slot is available | …"
    ("defer task, id_task", _plain_event(EventKind.DEFERRED)),
    ("no slot is available", _plain_event(EventKind.DEFERRED)),
    # SLT_WRN "forcing full prompt re-processing due to lack of cache data (likely due to SWA or
    # hybrid/recurrent memory, see …)" (2025–): the cached prefix could not be reused; and
    # "failed to truncate tokens with position >= 848 - clearing the memory" (the memory cannot
    # drop a suffix, so the slot's whole cache goes)
    ("forcing full prompt re-processing", _plain_event(EventKind.CACHE_MISS)),
    ("failed to truncate tokens", _plain_event(EventKind.CACHE_MISS)),
    ("context shift", _context_shift),
    # SLT_WRN "input truncated, n_ctx = 4096, n_keep = 0, n_left = 4096, n_prompt_tokens = 2982"
    # (to mid 2025): the prompt was longer than the slot's context and lost its middle
    ("input truncated, n_ctx", _plain_event(EventKind.CONTEXT_SHIFT)),
    ("eval time", _timing),
    # send_error's SRV_ERR "task id = 7, error: request (4390 tokens) exceeds the available
    # context size (4096 tokens), try increasing it" (2025: "the request exceeds the available
    # context size. try increasing the context size or enable context shift"), and "input (…
    # tokens) is larger than the max context size (… tokens). skipping"
    ("exceeds the available context size", _rejected),
    ("is larger than the max context size", _rejected),
    ("n_slots", _config),
    ("n_parallel = ", _config),
    ("n_ctx", _config),
    ("n_batch", _config),
    ("max context: ", _config),
)


# "stop processing: n_past = 71, truncated = 1": the request did not fit its slot's context
_TRUNCATED = re.compile(r"\btruncated\"?\s*[=:]\s*(?:1|true)\b")


def _read_events(line: str) -> tuple[LogEvent, ...]:
    """What one llama-server line says happened (`_READERS`); () for most lines. A slot freed
    with `truncated = 1` also says its request outgrew the slot's context (a context shift)."""
    for words, read in _READERS:
        if words in line and (event := read(line)) is not None:
            if (
                event.kind is EventKind.SEAT_FREED
                and "truncated" in line
                and _TRUNCATED.search(line)
            ):
                return (event, LogEvent(EventKind.CONTEXT_SHIFT))
            return (event,)
    return ()


def _read_stats(line: str) -> StatsLine | None:
    """SRV_INF "all slots are idle" (LOG_INFO too): nothing running, nothing waiting.

    llama-server logs no periodic stats; this line, printed when the last slot frees,
    is the one moment its log says how busy it is."""
    if "all slots are idle" not in line:
        return None
    return StatsLine(_ENGINE, None, 0.0, 0.0)


def _read_spec(line: str) -> SpecLine | None:
    """One request's draft acceptance: accepted and drafted tokens, and the rate it states."""
    found = _SPEC.search(line) if "draft acceptance" in line else None
    if found is None:
        return None
    length = _SPEC_LENGTH.search(line)
    positions = _SPEC_POSITIONS.search(line)
    return SpecLine(
        mean_acceptance_length=None if length is None else float(length.group(1)),
        accepted_tokens=int(found["accepted"]),
        drafted_tokens=int(found["drafted"]),
        per_position=(
            () if positions is None else tuple(float(v) for v in positions.group(1).split(","))
        ),
        acceptance_rate=float(found["rate"]),
    )


def _read_stamp(line: str, year: int) -> str | None:
    """The wall-clock time of a LOG_INFO record (its Unix `timestamp`), as local time; None
    for every other line — its "M.SS.mmm.uuu" prefix counts from the server's start."""
    del year  # a Unix time carries its own
    found = _UNIX_TIME.search(line) if "timestamp" in line else None
    if found is None:
        return None
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(int(found.group(1))))


LLAMACPP = EngineAdapter(
    name="llamacpp",
    title="llama.cpp",
    metrics=(LLAMACPP_METRICS,),
    endpoints=(
        Endpoint("/props", read_config=_read_props, read_limit=_props_limit),
        Endpoint("/slots", read_config=_read_slots, is_object=False),
    ),
    read_card=_read_card,
    log=LogFormat(
        read_stats=_read_stats,
        read_stamp=_read_stamp,
        read_spec=_read_spec,
        record_start=_RECORD,
        interval_s=None,  # no periodic stats line
        expected=(
            "llama-server lines (`slot launch_slot_: id  0 | task 12 | processing task`, "
            "`prompt eval time = … ms / N tokens`, `srv  update_slots: all slots are idle`)"
        ),
        read_events=_read_events,
        recognises=_RECOGNISES,
    ),
    knobs={
        Knob.MAX_SEATS: "--parallel",
        Knob.TOKEN_BUDGET: "--batch-size",
        Knob.MAX_CONTEXT: "--ctx-size",
        Knob.KV_CACHE_DTYPE: "--cache-type-k",
    },
    tokenize=TokenizeForm(
        "llama.cpp",
        TOKENIZE_PATH,
        _tokenize_fields,
        token_count,
        template_path=APPLY_TEMPLATE_PATH,
        read_template=templated_prompt,
        counts_like_usage=False,
    ),
)
