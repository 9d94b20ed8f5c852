"""collect, level 2: what a live server reports about its own configuration.

Takes a scrape (`vllm:cache_config_info`, TensorRT-LLM's `max` gauges) and
the server's base URL; gives a `ServerConfig` for run.json's `server_config`:
`max_model_len` and the served models from `/v1/models`, the version from
`/version` (vLLM), `/info` (TGI), `/get_server_info` (SGLang) or `/props`
(llama.cpp), KV-cache geometry, prefix caching, and llama.cpp's `/slots`.
Every probe is short and optional: an endpoint that does not answer becomes a
note, never an error, so the diagnosis can quote what it could learn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from infertriage.collect.http import FetchError, fetch_json
from infertriage.collect.parse import Exposition

__all__ = ["ServerConfig", "config_from_metrics", "fetch_server_config"]

_SCALARS = (str, int, float, bool, type(None))


def _typed(text: str) -> object:
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


def _int(value: object) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str):
        typed = _typed(value)
        return (
            int(typed) if isinstance(typed, int | float) and not isinstance(typed, bool) else None
        )
    return None


def _flat(document: Mapping[str, Any]) -> dict[str, Any]:
    """The scalar fields of a JSON object (nested objects and long strings left out)."""
    return {
        key: value
        for key, value in document.items()
        if isinstance(value, _SCALARS) and not (isinstance(value, str) and len(value) > 200)
    }


@dataclass(frozen=True)
class ServerConfig:
    """What the server said about itself; None where it did not say."""

    engine: str | None = None
    version: str | None = None
    model: str | None = None
    models: tuple[str, ...] = ()
    max_model_len: int | None = None
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    kv_tokens_total: int | None = None
    gpu_memory_utilization: float | None = None
    enable_prefix_caching: bool | None = None
    max_num_seqs: int | None = None
    details: dict[str, Any] = field(default_factory=dict)  # per source, scalar fields only
    answered: tuple[str, ...] = ()  # the endpoints that answered
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "version": self.version,
            "model": self.model,
            "models": list(self.models),
            "max_model_len": self.max_model_len,
            "num_gpu_blocks": self.num_gpu_blocks,
            "block_size": self.block_size,
            "kv_tokens_total": self.kv_tokens_total,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "enable_prefix_caching": self.enable_prefix_caching,
            "max_num_seqs": self.max_num_seqs,
            "details": self.details,
            "answered": list(self.answered),
            "notes": list(self.notes),
        }


def _trt_value(exposition: Exposition, family: str, key: str, kind: str) -> int | None:
    for sample in exposition.get(family):
        if sample.label(key) == kind:
            return int(sample.value)
    return None


def config_from_metrics(exposition: Exposition) -> dict[str, Any]:
    """Configuration the metrics themselves carry (pure): vLLM's cache_config_info, TRT-LLM's."""
    found: dict[str, Any] = {}
    info = exposition.get("vllm:cache_config_info")
    if info:
        cache = {key: _typed(value) for key, value in info[0].labels}
        found["cache_config_info"] = cache
        found["num_gpu_blocks"] = _int(cache.get("num_gpu_blocks"))
        found["block_size"] = _int(cache.get("block_size"))
        utilization = cache.get("gpu_memory_utilization")
        if isinstance(utilization, int | float) and not isinstance(utilization, bool):
            found["gpu_memory_utilization"] = float(utilization)
        prefix = cache.get("enable_prefix_caching")
        found["enable_prefix_caching"] = prefix if isinstance(prefix, bool) else None
    kv = "nv_trt_llm_kv_cache_block_metrics"
    if exposition.has(kv):
        found["num_gpu_blocks"] = _trt_value(exposition, kv, "kv_cache_block_type", "max")
        found["block_size"] = _trt_value(exposition, kv, "kv_cache_block_type", "tokens_per")
    max_requests = _trt_value(exposition, "nv_trt_llm_request_metrics", "request_type", "max")
    if max_requests is not None:
        found["max_num_seqs"] = max_requests
    return {key: value for key, value in found.items() if value is not None}


_PROBES: dict[str | None, tuple[str, ...]] = {
    "vllm": ("/v1/models", "/version"),
    "sglang": ("/v1/models", "/get_server_info"),
    "tgi": ("/v1/models", "/info"),
    "llamacpp": ("/v1/models", "/props", "/slots"),
}


async def _probe(
    session: aiohttp.ClientSession, base_url: str, path: str, timeout_s: float
) -> tuple[str, Any, str | None]:
    try:
        return path, await fetch_json(session, base_url + path, timeout_s=timeout_s), None
    except FetchError as err:
        return path, None, f"{path}: {err}"


def _from_models(document: Any, found: dict[str, Any]) -> None:
    data = document.get("data") if isinstance(document, dict) else None
    if not isinstance(data, list):
        return
    entries = [entry for entry in data if isinstance(entry, dict)]
    found["models"] = tuple(str(entry.get("id")) for entry in entries if entry.get("id"))
    if entries:
        found["model"] = str(entries[0].get("id") or "") or None
        found["max_model_len"] = _int(entries[0].get("max_model_len"))
        found["details"]["/v1/models"] = _flat(entries[0])


def _from_sglang(document: Mapping[str, Any], found: dict[str, Any]) -> None:
    found["version"] = document.get("version")
    found["max_model_len"] = found.get("max_model_len") or _int(document.get("context_length"))
    found["max_num_seqs"] = _int(document.get("max_running_requests"))
    found["kv_tokens_total"] = _int(document.get("max_total_num_tokens"))
    found["enable_prefix_caching"] = (
        None if "disable_radix_cache" not in document else not document["disable_radix_cache"]
    )


def _from_tgi(document: Mapping[str, Any], found: dict[str, Any]) -> None:
    found["version"] = document.get("version")
    found["model"] = found.get("model") or document.get("model_id")
    found["max_model_len"] = found.get("max_model_len") or _int(document.get("max_total_tokens"))
    found["max_num_seqs"] = _int(document.get("max_concurrent_requests"))
    found["kv_tokens_total"] = _int(document.get("max_batch_total_tokens"))


def _from_props(document: Mapping[str, Any], found: dict[str, Any]) -> None:
    settings = document.get("default_generation_settings")
    n_ctx = document.get("n_ctx")
    if n_ctx is None and isinstance(settings, dict):
        n_ctx = settings.get("n_ctx")
    found["version"] = document.get("build_info")
    found["max_model_len"] = found.get("max_model_len") or _int(n_ctx)
    found["max_num_seqs"] = _int(document.get("total_slots"))


def _from_slots(document: Any, found: dict[str, Any]) -> None:
    if not isinstance(document, list):
        return
    slots = [slot for slot in document if isinstance(slot, dict)]
    busy = sum(1 for slot in slots if slot.get("is_processing"))
    contexts = {_int(slot.get("n_ctx")) for slot in slots} - {None}
    found["details"]["/slots"] = {
        "num_slots": len(slots),
        "num_busy": busy,
        "n_ctx_per_slot": sorted(c for c in contexts if c is not None),
    }


def _absorb(path: str, document: Any, found: dict[str, Any]) -> None:
    if path == "/v1/models":
        _from_models(document, found)
        return
    if path == "/slots":
        _from_slots(document, found)
        return
    if not isinstance(document, dict):
        return
    found["details"][path] = _flat(document)
    if path == "/version":
        found["version"] = document.get("version")
    elif path == "/get_server_info":
        _from_sglang(document, found)
    elif path == "/info":
        _from_tgi(document, found)
    elif path == "/props":
        _from_props(document, found)


async def fetch_server_config(
    session: aiohttp.ClientSession,
    base_url: str,
    *,
    engine: str | None,
    exposition: Exposition | None = None,
    timeout_s: float = 3.0,
) -> ServerConfig:
    """Ask the server about itself (each probe bounded by `timeout_s`) and merge the answers."""
    found: dict[str, Any] = {"details": {}}
    if exposition is not None:
        from_metrics = config_from_metrics(exposition)
        if "cache_config_info" in from_metrics:
            found["details"]["cache_config_info"] = from_metrics.pop("cache_config_info")
        found.update(from_metrics)
    paths = _PROBES.get(engine, ("/v1/models",))
    results = await asyncio.gather(*(_probe(session, base_url, p, timeout_s) for p in paths))
    notes, answered = [], []
    for path, document, failure in results:
        if failure is not None:
            notes.append(failure)
            continue
        answered.append(path)
        _absorb(path, document, found)
    if (
        found.get("kv_tokens_total") is None
        and found.get("num_gpu_blocks")
        and found.get("block_size")
    ):
        found["kv_tokens_total"] = found["num_gpu_blocks"] * found["block_size"]
    version = found.get("version")
    return ServerConfig(
        engine=engine,
        version=str(version) if version is not None else None,
        model=found.get("model"),
        models=tuple(found.get("models", ())),
        max_model_len=found.get("max_model_len"),
        num_gpu_blocks=found.get("num_gpu_blocks"),
        block_size=found.get("block_size"),
        kv_tokens_total=found.get("kv_tokens_total"),
        gpu_memory_utilization=found.get("gpu_memory_utilization"),
        enable_prefix_caching=found.get("enable_prefix_caching"),
        max_num_seqs=found.get("max_num_seqs"),
        details=found["details"],
        answered=tuple(answered),
        notes=tuple(notes),
    )
