"""Live server configuration: what each engine says about itself, from a real HTTP server."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from infertriage.analyze.signals.deployment import config_signals
from infertriage.collect import fetch_server_config, parse_metrics_text
from infertriage.collect.server_config import config_from_metrics
from infertriage.schemas import Deployment, RunServerConfig


def _fetch(server: Any, engine: str | None, text: str | None = None) -> RunServerConfig:
    exposition = parse_metrics_text(text, "m") if text else None

    async def run() -> RunServerConfig:
        async with aiohttp.ClientSession() as session:
            return await fetch_server_config(
                session, server.url, engine=engine, exposition=exposition, timeout_s=2.0
            )

    return asyncio.run(run())


def test_vllm_cache_config_info_is_typed(shared_fixture) -> None:  # type: ignore[no-untyped-def]
    text = shared_fixture("metrics/vllm.txt").read_text()
    found = config_from_metrics(parse_metrics_text(text, "vllm"))
    assert found["num_gpu_blocks"] == 7281 and found["block_size"] == 16
    assert found["gpu_memory_utilization"] == 0.9
    assert found["enable_prefix_caching"] is False
    assert found["cache_config_info"]["num_gpu_blocks_override"] is None
    assert found["cache_config_info"]["cache_dtype"] == "auto"


def test_vllm_live(shared_fixture, live_server: Any) -> None:  # type: ignore[no-untyped-def]
    text = shared_fixture("metrics/vllm.txt").read_text()
    live_server.set_json(
        "/v1/models",
        {"object": "list", "data": [{"id": "facebook/opt-125m", "max_model_len": 2048}]},
    )
    live_server.set_json("/version", {"version": "0.10.1"})
    config = _fetch(live_server, "vllm", text)
    assert config.version == "0.10.1" and config.model == "facebook/opt-125m"
    assert config.max_model_len == 2048
    assert (config.num_gpu_blocks, config.block_size, config.kv_tokens_total) == (7281, 16, 116496)
    assert config.enable_prefix_caching is False
    assert set(config.answered) == {"/v1/models", "/version"} and not config.notes
    document = config.model_dump(mode="json")
    assert document["details"]["cache_config_info"]["swap_space_bytes"] == 4294967296


def test_llamacpp_props_and_slots(live_server: Any) -> None:
    live_server.set_json(
        "/props",
        {
            "default_generation_settings": {"n_ctx": 8192, "params": {"top_k": 40}},
            "total_slots": 4,
            "build_info": "b5000-abcdef",
        },
    )
    live_server.set_json(
        "/slots",
        [{"id": i, "n_ctx": 2048, "is_processing": i == 0} for i in range(4)],
    )
    config = _fetch(live_server, "llamacpp")
    assert config.max_model_len == 8192 and config.max_num_seqs == 4
    assert config.version == "b5000-abcdef"
    assert config.details["/slots"] == {"num_slots": 4, "num_busy": 1, "n_ctx_per_slot": [2048]}
    assert any(note.startswith("/v1/models") for note in config.notes)  # 404 here: a note


def test_sglang_server_info(live_server: Any) -> None:
    live_server.set_json(
        "/get_server_info",
        {
            "version": "0.4.6",
            "context_length": 131072,
            "max_running_requests": 256,
            "max_total_num_tokens": 500000,
            "disable_radix_cache": False,
            "chunked_prefill_size": 256,
            "disable_cuda_graph": True,
            "nested": {"ignored": True},
        },
    )
    config = _fetch(live_server, "sglang")
    assert config.version == "0.4.6" and config.max_model_len == 131072
    assert config.max_num_seqs == 256 and config.kv_tokens_total == 500000
    assert config.enable_prefix_caching is True
    # the step budget and CUDA graphs under the names the rules read
    assert config.max_num_batched_tokens == 256 and config.cuda_graphs is False
    signals = {s.name: s.value for s in config_signals(config, Deployment())}
    assert signals["config.max_num_batched_tokens"] == 256 and signals["config.cuda_graphs"] == 0
    assert "nested" not in config.details["/get_server_info"]


def test_tgi_info(live_server: Any) -> None:
    live_server.set_json(
        "/info",
        {
            "model_id": "bigscience/bloom-560m",
            "max_total_tokens": 2048,
            "max_concurrent_requests": 128,
            "max_batch_total_tokens": 32000,
            "max_batch_prefill_tokens": 4096,
            "version": "2.4.0",
        },
    )
    config = _fetch(live_server, "tgi")
    assert config.model == "bigscience/bloom-560m" and config.version == "2.4.0"
    assert config.max_model_len == 2048 and config.max_num_seqs == 128
    assert config.max_num_batched_tokens == 4096 and config.cuda_graphs is None


def test_nothing_answers_is_notes_not_errors(free_port: int) -> None:
    class Nowhere:
        url = f"http://127.0.0.1:{free_port}"

    config = _fetch(Nowhere(), "vllm")
    assert config.answered == [] and len(config.notes) == 2
    assert all("connection refused" in note for note in config.notes)
