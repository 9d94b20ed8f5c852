"""Each engine's adapter: its metric names select series in the real captures, its knobs
are real flags of that engine, and its config, limit and log readers read what it says."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from infertriage.collect import detect, parse_metrics_text
from infertriage.collect.adapters import Availability, adapt
from infertriage.engines import (
    ENGINES,
    LLAMACPP,
    SGLANG,
    TGI,
    TRTLLM,
    VLLM,
    EngineAdapter,
    Knob,
    MetricTable,
    SaidLimit,
    engine_of,
    knob_flag,
    limit_from_card,
    read_model_list,
    vllm,
)

Fixture = Callable[[str], Path]

# Per metric table (named as detection names it): vocabulary names its capture must carry.
CORE = {
    "vllm": ("queue.waiting", "queue.running", "kv.usage", "preemptions", "server.ttft"),
    "sglang": ("queue.waiting", "queue.running", "kv.usage", "server.ttft", "server.itl"),
    "tgi": ("queue.waiting", "queue.running", "requests.finished", "tokens.prompt"),
    "llamacpp": ("queue.waiting", "queue.running", "kv.tokens_used", "tokens.generation"),
    "trtllm_triton": ("queue.waiting", "queue.running", "kv.usage", "kv.blocks_total"),
    "triton": ("queue.waiting", "requests.finished", "server.queue_seconds"),
}
TABLES = [(engine, table) for engine in ENGINES for table in engine.metrics]


@pytest.mark.parametrize(("engine", "table"), TABLES, ids=[t.engine for _, t in TABLES])
def test_metric_names_select_series_in_the_real_capture(
    engine: EngineAdapter, table: MetricTable, shared_fixture: Fixture
) -> None:
    name = table.engine  # the table's detection name
    path = shared_fixture(f"metrics/{name}.txt")
    exposition = parse_metrics_text(path.read_text(), path.name)
    detected = detect(exposition).engine
    assert detected is not None and detected.engine == name
    assert engine_of(name) is engine
    adapted = adapt(exposition, detected)
    present = {s.name: s for s in adapted.statuses if s.status is Availability.PRESENT}
    assert set(CORE[name]) <= present.keys()
    for status in present.values():  # every raw name it used is a series of the capture
        if status.note != "derived":
            raw = (status.raw_name or "").split("{")[0].split(".")[0]
            assert exposition.has(raw) or exposition.has(f"{raw}_bucket"), status


# The flag each engine takes for each knob, checked against the engine's own docs:
# vLLM: docs.vllm.ai "Engine Arguments" (serving/engine_args);
# SGLang: docs.sglang.io "Server Arguments" (advanced_features/server_arguments) and
#   huggingface.co/docs/inference-endpoints/engines/sglang;
# TGI: huggingface.co/docs/text-generation-inference/reference/launcher;
# llama.cpp: tools/server/README.md (`-np, --parallel N`), the llama-server(1) man page;
# TensorRT-LLM: nvidia.github.io/TensorRT-LLM/commands/trtllm-serve.html.
KNOBS: dict[str, dict[Knob, str]] = {
    VLLM.name: {
        Knob.MAX_SEATS: "--max-num-seqs",
        Knob.TOKEN_BUDGET: "--max-num-batched-tokens",
        Knob.MEMORY_FRACTION: "--gpu-memory-utilization",
        Knob.MAX_CONTEXT: "--max-model-len",
        Knob.KV_CACHE_DTYPE: "--kv-cache-dtype",
        Knob.PREFIX_CACHING: "--enable-prefix-caching",
        Knob.TENSOR_PARALLEL: "--tensor-parallel-size",
        Knob.EAGER: "--enforce-eager",
        # an environment variable (vllm/envs.py; vllm/attention/selector.py reads it)
        Knob.ATTENTION_BACKEND: "VLLM_ATTENTION_BACKEND",
        Knob.API_SERVERS: "--api-server-count",  # "How many API server processes to run."
        Knob.STREAM_INTERVAL: "--stream-interval",
        Knob.SKIP_TOKENIZER: "--skip-tokenizer-init",
        Knob.KV_TRANSFER: "--kv-transfer-config",  # "The configurations for distributed KV
        # cache transfer." (a JSON: kv_connector NixlConnector, kv_role, kv_buffer_device)
        Knob.OFFLOAD_SIZE: "--kv-offloading-size",  # vllm/config/cache.py, GiB
        Knob.EXPERT_BALANCER: "--enable-eplb",
        Knob.PIPELINE_PARALLEL: "--pipeline-parallel-size",
    },
    SGLANG.name: {
        Knob.MAX_SEATS: "--max-running-requests",
        Knob.TOKEN_BUDGET: "--chunked-prefill-size",
        Knob.MEMORY_FRACTION: "--mem-fraction-static",
        Knob.MAX_CONTEXT: "--context-length",
        Knob.KV_CACHE_DTYPE: "--kv-cache-dtype",
        Knob.TENSOR_PARALLEL: "--tp-size",
        Knob.EAGER: "--disable-cuda-graph",
        Knob.CUDA_GRAPH_MAX_BATCH: "--cuda-graph-max-bs",
        Knob.ATTENTION_BACKEND: "--attention-backend",
        Knob.API_SERVERS: "--tokenizer-worker-num",
        Knob.STREAM_INTERVAL: "--stream-interval",
        Knob.SKIP_TOKENIZER: "--skip-tokenizer-init",
        Knob.KV_TRANSFER: "--disaggregation-transfer-backend",  # mooncake (default), nixl
        Knob.OFFLOAD_SIZE: "--hicache-size",  # GB per rank; --hicache-ratio the alternative
        Knob.EXPERT_BALANCER: "--enable-eplb",
        Knob.PIPELINE_PARALLEL: "--pp-size",
    },
    TGI.name: {
        Knob.MAX_SEATS: "--max-concurrent-requests",
        Knob.TOKEN_BUDGET: "--max-batch-prefill-tokens",
        Knob.MEMORY_FRACTION: "--cuda-memory-fraction",
        Knob.MAX_CONTEXT: "--max-total-tokens",
        Knob.TENSOR_PARALLEL: "--num-shard",
    },
    LLAMACPP.name: {
        Knob.MAX_SEATS: "--parallel",
        Knob.TOKEN_BUDGET: "--batch-size",
        Knob.MAX_CONTEXT: "--ctx-size",
        Knob.KV_CACHE_DTYPE: "--cache-type-k",
    },
    TRTLLM.name: {
        Knob.MAX_SEATS: "--max_batch_size",
        Knob.TOKEN_BUDGET: "--max_num_tokens",
        Knob.MEMORY_FRACTION: "--kv_cache_free_gpu_memory_fraction",
        Knob.MAX_CONTEXT: "--max_seq_len",
        Knob.TENSOR_PARALLEL: "--tp_size",
    },
}


@pytest.mark.parametrize("engine", ENGINES, ids=[e.name for e in ENGINES])
def test_each_knob_names_a_real_flag_of_that_engine(engine: EngineAdapter) -> None:
    assert dict(engine.knobs) == KNOBS[engine.name]
    assert Knob.MAX_SEATS in engine.knobs  # every engine caps its batch somehow


def test_advice_names_the_engines_flag_and_vllms_when_unknown() -> None:
    assert knob_flag("sglang", Knob.MAX_SEATS) == "--max-running-requests"
    assert knob_flag("triton", Knob.MAX_SEATS) == "--max_batch_size"  # plain Triton: TRT-LLM's
    assert knob_flag(None, Knob.MAX_SEATS) == "--max-num-seqs"
    assert knob_flag("llamacpp", Knob.MEMORY_FRACTION) == "--gpu-memory-utilization"


def test_config_endpoints_and_what_they_say() -> None:
    info = {"version": "0.4", "context_length": 8192, "max_req_input_len": 8000,
            "max_running_requests": 48, "max_total_num_tokens": 90000,
            "disable_radix_cache": False}  # fmt: skip
    endpoint = SGLANG.endpoint("/get_server_info")
    assert endpoint is not None and endpoint.read_config and endpoint.read_limit
    found: dict[str, object] = {"details": {}}
    endpoint.read_config(info, found)
    assert found["max_num_seqs"] == 48 and found["enable_prefix_caching"] is True
    assert endpoint.read_limit(info) == SaidLimit(8192, "/get_server_info context_length", 8000)
    tgi = TGI.endpoint("/info")
    assert tgi is not None and tgi.read_limit is not None
    said = tgi.read_limit({"max_total_tokens": 4096, "max_input_length": 4000})
    assert said == SaidLimit(4096, "/info max_total_tokens", 4000)
    props = LLAMACPP.endpoint("/props")
    assert props is not None and props.read_limit is not None
    said = props.read_limit({"default_generation_settings": {"n_ctx": 2048}})
    assert said == SaidLimit(2048, "/props n_ctx")


def test_the_model_list_and_its_cards() -> None:
    listing = read_model_list({"data": [{"id": "a", "max_model_len": 4096}, {"id": "b"}]})
    assert listing.ids == ("a", "b") and not listing.problem
    assert limit_from_card(listing.cards[0]) == SaidLimit(4096, "/v1/models max_model_len")
    card = {"id": "m", "meta": {"n_ctx": 1024, "n_ctx_train": 131072}}
    assert limit_from_card(card) == SaidLimit(1024, "/v1/models meta.n_ctx")
    assert read_model_list({"object": "list"}).problem == "no data list"
    assert read_model_list({"data": [{"object": "model"}]}).problem == "an entry has no id"
    assert read_model_list([1, 2]).ids == ()


def test_log_formats_read_their_engines_lines() -> None:
    assert VLLM.log is not None and SGLANG.log is not None
    v1 = (
        "(APIServer pid=7) INFO 12-02 16:31:45 [loggers.py:123] Engine 000: Avg prompt "
        "throughput: 10.0 tokens/s, Running: 4 reqs, Waiting: 2 reqs, GPU KV cache usage: 37.5%"
    )
    stats = VLLM.log.read_stats(v1)
    assert stats is not None and (stats.engine, stats.kv_usage) == ("vllm", 0.375)
    assert (stats.running, stats.waiting) == (4.0, 2.0)
    assert VLLM.log.read_stamp(v1, 2026) == "2026-12-02 16:31:45"
    sg = (
        "[2026-12-02 16:31:45] Decode batch. #running-req: 233, #token: 370959, token usage: "
        "0.82, cuda graph: True, gen throughput (token/s): 4594.01, #queue-req: 317"
    )
    stats = SGLANG.log.read_stats(sg)
    assert stats is not None and (stats.running, stats.waiting, stats.kv_usage) == (233, 317, 0.82)
    assert SGLANG.log.read_stamp(sg, 1999) == "2026-12-02 16:31:45"
    assert SGLANG.log.read_stats(v1) is None and VLLM.log.read_stats(sg) is None


@pytest.mark.parametrize(
    ("answer", "count"),
    [({"count": 12}, 12), ({"count": 0}, 0), ({"count": -5}, None), ({"count": True}, None),
     ({"count": "12"}, None), ([12], None), (None, None)],
)  # fmt: skip
def test_a_tokenize_count_is_a_whole_number_not_below_zero(
    answer: object, count: int | None
) -> None:
    # a negative count (a hostile or broken server) would make the fit's ratio negative and
    # every prompt "fit": it is no answer, as a missing one is
    assert vllm.token_count(answer) == count
