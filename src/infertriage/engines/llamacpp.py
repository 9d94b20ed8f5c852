"""engines, level 0½: the llama.cpp server adapter — every llama-server-specific fact.

Its `/metrics` names (`llamacpp:`, only with `--metrics`; its token counters
move only when a request finishes, and its `*_tokens_seconds` throughput
gauges are reset on every read of `/metrics`, so each scrape sees only what
finished since the previous read, by anyone; no latency histograms;
`kv_cache_usage_ratio` was dropped by newer upstream builds); `/props`
(`build_info`, `n_ctx` or `default_generation_settings.n_ctx`,
`total_slots`), `/slots`, `meta.n_ctx` in its `/v1/models` cards (never
`n_ctx_train`, the model's trained length); and its flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infertriage.engines.base import Endpoint, EngineAdapter, Knob, SaidLimit, as_int, positive
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


LLAMACPP = EngineAdapter(
    name="llamacpp",
    title="llama.cpp",
    metrics=(LLAMACPP_METRICS,),
    endpoints=(
        Endpoint("/props", read_config=_read_props, read_limit=_props_limit),
        Endpoint("/slots", read_config=_read_slots, is_object=False),
    ),
    read_card=_read_card,
    knobs={
        Knob.MAX_SEATS: "--parallel",
        Knob.TOKEN_BUDGET: "--batch-size",
        Knob.MAX_CONTEXT: "--ctx-size",
        Knob.KV_CACHE_DTYPE: "--cache-type-k",
    },
)
