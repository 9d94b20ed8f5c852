"""The twin over real HTTP: the openai SDK streams from it; /metrics parses as vLLM's does."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from infertriage.twin.frontend import split_tokens
from infertriage.twin.process import TwinProcess


@pytest.fixture(scope="module")
def twin() -> Iterator[TwinProcess]:
    with TwinProcess("healthy", load_time_s=0.3) as process:
        yield process


def _client(twin: TwinProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{twin.url}/v1", api_key="unused", max_retries=0, timeout=30)


def _post(url: str, body: bytes) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return str(response.read().decode())


def test_openai_sdk_streams_chat_with_usage(twin: TwinProcess) -> None:
    client = _client(twin)
    model = client.models.list().data[0].id
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Tell me about KV caches, briefly."}],
        max_tokens=12,
        stream=True,
        stream_options={"include_usage": True},
    )
    text, usage, reasons = "", None, []
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            reasons.append(choice.finish_reason)
    assert usage is not None
    assert usage.completion_tokens == 12
    assert len(split_tokens(text)) == 12  # streamed text, /tokenize and usage agree
    assert reasons[-1] == "length"


def test_completions_non_stream_and_tokenize_agree(twin: TwinProcess) -> None:
    client = _client(twin)
    prompt = "The quick brown fox jumps over the lazy dog " * 4
    result = client.completions.create(model="llama-3.1-8b", prompt=prompt, max_tokens=5)
    status, tokenized = _post(f"{twin.url}/tokenize", json.dumps({"prompt": prompt}).encode())
    assert status == 200
    assert result.usage is not None
    assert result.usage.prompt_tokens == tokenized["count"] == 36
    assert result.usage.completion_tokens == 5


def test_stop_string_ends_the_request(twin: TwinProcess) -> None:
    client = _client(twin)
    full = client.completions.create(model="llama-3.1-8b", prompt="stop test", max_tokens=8)
    words = full.choices[0].text.split()
    stopped = client.completions.create(
        model="llama-3.1-8b", prompt="stop test", max_tokens=8, stop=[f" {words[3]}"]
    )
    assert stopped.choices[0].finish_reason == "stop"
    assert stopped.choices[0].text.split() == words[:3]


@pytest.mark.parametrize(
    ("path", "body", "status", "needle"),
    [
        ("/v1/completions", b"{not json", 400, "not valid JSON"),
        ("/v1/completions", b'{"prompt": "hi", "model": "gpt-9"}', 404, "does not exist"),
        ("/v1/completions", b'{"prompt": "x ' + b"y " * 9000 + b'"}', 400, "maximum context"),
        # vLLM's words for a prompt + max_tokens past the context ("x" and 8,000 " y")
        (
            "/v1/completions",
            b'{"prompt": "x ' + b"y " * 8000 + b'", "max_tokens": 500}',
            400,
            "maximum context length is 8192 tokens. However, you requested 8501 tokens "
            "(8001 in the messages, 500 in the completion)",
        ),
        (
            "/v1/completions",
            b'{"prompt": "hi", "max_tokens": 4, "min_tokens": 8}',
            400,
            "min_tokens must be less than or equal to max_tokens=4, got 8.",
        ),
        ("/v1/chat/completions", b'{"messages": []}', 400, "messages"),
    ],
)
def test_errors_are_openai_format(
    twin: TwinProcess, path: str, body: bytes, status: int, needle: str
) -> None:
    code, document = _post(f"{twin.url}{path}", body)
    assert code == status
    error = document["error"]
    assert isinstance(error, dict) and needle in str(error["message"])


def test_models_lists_max_model_len(twin: TwinProcess) -> None:
    document = json.loads(_get(f"{twin.url}/v1/models"))
    assert document["data"][0]["max_model_len"] == 8192


def _families(text: str) -> dict[str, tuple[str, set[str]]]:
    families: dict[str, tuple[str, set[str]]] = {}
    for family in text_string_to_metric_families(text):
        labels: set[str] = set()
        for sample in family.samples:
            labels |= set(sample.labels) - {"le", "quantile"}
        families[family.name] = (family.type, labels)
    return families


def test_metrics_match_vllm_families(twin: TwinProcess, shared_fixture) -> None:  # type: ignore[no-untyped-def]
    _client(twin).completions.create(model="llama-3.1-8b", prompt="warm up", max_tokens=3)
    ours = _families(_get(f"{twin.url}/metrics"))
    real = _families(Path(shared_fixture("metrics/vllm.txt")).read_text())
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions",
        "vllm:prompt_tokens",
        "vllm:generation_tokens",
        "vllm:prefix_cache_queries",
        "vllm:prefix_cache_hits",
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:request_queue_time_seconds",
        "vllm:cache_config_info",
    ):
        assert name in ours, name
    shared = set(ours) & set(real)
    assert len(shared) >= 15
    for name in shared:
        assert ours[name][0] == real[name][0], f"{name}: type {ours[name][0]} vs {real[name][0]}"
        # vLLM V1 labels every engine series `engine` too (`labelnames = ["model_name",
        # "engine"]`, vllm/v1/metrics/loggers.py); this capture is older than that label
        ours_labels = ours[name][1] - {"engine"}
        assert ours_labels == real[name][1], f"{name}: labels {ours[name][1]} vs {real[name][1]}"
        assert "engine" in ours[name][1], name
    info_labels = ours["vllm:cache_config_info"][1]
    assert {"num_gpu_blocks", "block_size", "gpu_memory_utilization"} <= info_labels


def test_dcgm_fields(twin: TwinProcess) -> None:
    names = {f.name for f in text_string_to_metric_families(_get(f"{twin.url}/dcgm/metrics"))}
    for field in (
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_XID_ERRORS",
    ):
        assert field in names, field


def test_health_is_503_until_loaded() -> None:
    with TwinProcess("healthy", load_time_s=0.0) as twin:
        assert _get(f"{twin.url}/health") == ""
    slow = TwinProcess("healthy", load_time_s=30.0, timeout_s=1.0)
    with pytest.raises(Exception, match="not healthy"):
        slow.start()


def test_bad_scenario_fails_to_start_with_the_reason(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("engine: {max_num_seqs: many}\n")
    with pytest.raises(Exception, match="max_num_seqs"):
        TwinProcess(str(bad)).start()
