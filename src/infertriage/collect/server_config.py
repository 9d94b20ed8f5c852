"""collect, level 2: what a live server reports about its own configuration.

Takes a scrape (`vllm:cache_config_info`, TensorRT-LLM's `max` gauges) and
the server's base URL; gives run.json's `server_config` (`schemas.RunServerConfig`):
`max_model_len` and the served models from `/v1/models`, then what the
engine's adapter (`infertriage.engines`) names as its config endpoints and
reads from them: the version (vLLM `/version`, TGI `/info`, SGLang
`/get_server_info`, llama.cpp `/props`), KV-cache geometry, prefix caching,
and llama.cpp's `/slots`.
Every probe is short and optional: an endpoint that does not answer becomes a
note, never an error, so the diagnosis can quote what it could learn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import aiohttp

from infertriage.collect.http import FetchError, fetch_json
from infertriage.collect.parse import Exposition
from infertriage.engines import EngineAdapter, as_int, engine_of, read_model_list, registered
from infertriage.schemas import RunServerConfig

__all__ = ["config_from_metrics", "fetch_server_config"]

_SCALARS = (str, int, float, bool, type(None))


def _flat(document: Mapping[str, Any]) -> dict[str, Any]:
    """The scalar fields of a JSON object (nested objects and long strings left out)."""
    return {
        key: value
        for key, value in document.items()
        if isinstance(value, _SCALARS) and not (isinstance(value, str) and len(value) > 200)
    }


def config_from_metrics(exposition: Exposition) -> dict[str, Any]:
    """Configuration the metrics themselves carry (pure): each engine adapter's reader
    (`EngineAdapter.config_in_metrics`), in the registry's order; a later one's value wins."""
    found: dict[str, Any] = {}
    for adapter in registered():
        if adapter.config_in_metrics is not None:
            said = adapter.config_in_metrics(exposition).items()
            found |= {key: value for key, value in said if value is not None}
    return found


_MODELS_PATH = "/v1/models"


def _paths(adapter: EngineAdapter | None) -> tuple[str, ...]:
    """`/v1/models`, then the endpoints where the engine says its configuration."""
    endpoints = adapter.endpoints if adapter is not None else ()
    return (_MODELS_PATH, *(e.path for e in endpoints if e.read_config is not None))


async def _probe(
    session: aiohttp.ClientSession, base_url: str, path: str, timeout_s: float
) -> tuple[str, Any, str | None]:
    try:
        return path, await fetch_json(session, base_url + path, timeout_s=timeout_s), None
    except FetchError as err:
        return path, None, f"{path}: {err}"


def _from_models(document: Any, found: dict[str, Any]) -> None:
    listing = read_model_list(document)
    if not listing.is_list:
        return
    found["models"] = listing.ids
    if listing.cards:
        first = listing.cards[0]
        found["model"] = str(first.get("id") or "") or None
        found["max_model_len"] = as_int(first.get("max_model_len"))
        found["details"][_MODELS_PATH] = _flat(first)


def _absorb(adapter: EngineAdapter | None, path: str, document: Any, found: dict[str, Any]) -> None:
    if path == _MODELS_PATH:
        _from_models(document, found)
        return
    endpoint = adapter.endpoint(path) if adapter is not None else None
    if endpoint is None or endpoint.read_config is None:
        return
    if endpoint.is_object:
        if not isinstance(document, dict):
            return
        found["details"][path] = _flat(document)
    endpoint.read_config(document, found)


async def fetch_server_config(
    session: aiohttp.ClientSession,
    base_url: str,
    *,
    engine: str | None,
    exposition: Exposition | None = None,
    timeout_s: float = 3.0,
) -> RunServerConfig:
    """Ask the server about itself (each probe bounded by `timeout_s`) and merge the answers."""
    found: dict[str, Any] = {"details": {}}
    if exposition is not None:
        from_metrics = config_from_metrics(exposition)
        if "cache_config_info" in from_metrics:
            found["details"]["cache_config_info"] = from_metrics.pop("cache_config_info")
        found.update(from_metrics)
    adapter = engine_of(engine)
    paths = _paths(adapter)
    results = await asyncio.gather(*(_probe(session, base_url, p, timeout_s) for p in paths))
    notes, answered = [], []
    for path, document, failure in results:
        if failure is not None:
            notes.append(failure)
            continue
        answered.append(path)
        _absorb(adapter, path, document, found)
    if (
        found.get("kv_tokens_total") is None
        and found.get("num_gpu_blocks")
        and found.get("block_size")
    ):
        found["kv_tokens_total"] = found["num_gpu_blocks"] * found["block_size"]
    version, model = found.get("version"), found.get("model")
    return RunServerConfig(
        engine=engine,
        version=str(version) if version is not None else None,
        model=model if isinstance(model, str) else None,  # server text: a name or nothing
        models=list(found.get("models", ())),
        max_model_len=found.get("max_model_len"),
        num_gpu_blocks=found.get("num_gpu_blocks"),
        block_size=found.get("block_size"),
        kv_tokens_total=found.get("kv_tokens_total"),
        gpu_memory_utilization=found.get("gpu_memory_utilization"),
        enable_prefix_caching=found.get("enable_prefix_caching"),
        max_num_seqs=found.get("max_num_seqs"),
        max_num_batched_tokens=found.get("max_num_batched_tokens"),
        cuda_graphs=found.get("cuda_graphs"),
        details=found["details"],
        answered=answered,
        notes=notes,
    )
